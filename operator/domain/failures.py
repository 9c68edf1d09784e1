"""A pass that failed: what the object's status says about it, and when the next try comes.

A reconcile pass fails when the API server refused or never answered a call the
pass needed — one that escaped the pass, or a write of its plan that did not
land. The status always says so, with the API's own message (which names the
verb and the resource): ``Reconciling`` while the failure may pass by itself
(the API server restarting or overloaded, a 409 race), ``Stalled`` at once
when only a person can fix it (a permission missing from the Role, a write the
API server finds invalid) and after ``STALL_AFTER`` failed passes in a row
otherwise. Tessera keeps retrying either way, each object on its own capped
exponential backoff, reset by the first pass that succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass

from tessera.domain.conditions import Status, Verdict

STALL_AFTER = 5
"""Failed passes in a row after which even a transient failure reports Stalled."""
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
INTERNAL = -1
"""``Failure.status`` of an error that is not an answer of the API server (a bug)."""


@dataclass(frozen=True)
class Failure:
    """One refused or unanswered API call: its HTTP status (0: no answer) and the message."""

    status: int
    message: str


@dataclass(frozen=True)
class Class:
    """How a status is reported: the condition's reason, and whether it may pass by itself."""

    reason: str
    transient: bool


_BY_STATUS = {
    # status: the condition's reason, and whether retrying alone may fix it
    INTERNAL: Class("InternalError", True),  # a bug in Tessera: retried, Stalled after N
    0: Class("APIUnreachable", True),  # no answer: the API server restarts or the network is down
    400: Class("BadRequest", False),  # the API server rejects the request as malformed
    401: Class("Unauthorized", False),  # the token expired or was revoked
    403: Class("Forbidden", False),  # RBAC: a verb missing from the operator's Role
    404: Class("NotFound", True),  # something the pass read went away under it
    409: Class("Conflict", True),  # another writer got there first: re-read and retry
    422: Class("Invalid", False),  # the API server (validation, admission) refuses the write
    429: Class("Throttled", True),  # API priority and fairness: the server asks us to slow down
}
_SERVER_ERROR = Class("APIServerError", True)  # 5xx: the API server or etcd is struggling
_OTHER = Class("APIError", False)  # any other refusal: a person has to look


def classify(status: int) -> Class:
    if status >= 500:
        return _SERVER_ERROR
    return _BY_STATUS.get(status, _OTHER)


def transient(status: int) -> bool:
    """Whether retrying alone may fix a call that got ``status``."""
    return classify(status).transient


def verdict(
    failure: Failure, tries: int, extra: tuple[tuple[str, Status, str, str], ...] = ()
) -> Verdict:
    """What a pass reports after its ``tries``-th failure in a row (``tries`` >= 1)."""
    how = classify(failure.status)
    if not how.transient:
        return Verdict("stalled", how.reason, f"{failure.message}; retrying with backoff", extra)
    if tries >= STALL_AFTER:
        text = f"{failure.message}; still failing after {STALL_AFTER} tries, retrying with backoff"
        return Verdict("stalled", how.reason, text, extra)
    return Verdict("progressing", how.reason, f"{failure.message}; retrying", extra)


def backoff(tries: int, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_CAP_S) -> float:
    """Seconds before the next pass after ``tries`` failed passes in a row: ``base`` doubling
    with each failure up to ``cap``; 0 when the last pass succeeded (no backoff)."""
    if tries <= 0:
        return 0.0
    return min(cap, base * 2.0 ** min(tries - 1, 62))
