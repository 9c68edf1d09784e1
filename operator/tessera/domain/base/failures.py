"""A pass that failed: what the object's status says about it, and when the next try comes.

A reconcile pass fails when the API server refused or never answered a call the
pass needed — one that escaped the pass, or a write of its plan that did not
land. The status always says so, with the API's own message (which names the
verb and the resource): ``Reconciling`` while the failure may pass by itself
(the API server restarting or overloaded, a 409 race), ``Stalled`` at once
when only a person can fix it (a permission missing from the Role, a write the
API server finds invalid) and after ``STALL_AFTER`` failed passes in a row
otherwise — and no sooner than ``STALL_AFTER_S`` after the first of them, since
a wake-up skips the backoff and five passes can fail within seconds on a busy
pool. Tessera keeps retrying either way, each object on its own capped
exponential backoff, reset by the first pass that succeeds.

The rules of reporting live here too, so they are pure and table-tested: which
one failure a pass with several refused writes reports (``reported``: the same
one whatever order the writes finished in), whether a pass posts an Event
(``announces``: an unchanged failure posts none), and whether it counts as
failed (``counts_as_failed``: also when its status could not be written).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tessera.domain.base.conditions import READY, Status, Verdict, condition

STALL_AFTER = 5
"""Failed passes in a row after which even a transient failure reports Stalled..."""
STALL_AFTER_S = 60.0
"""...once this many seconds have passed since the first of them."""
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
    409: Class("APIConflict", True),  # another writer got there first: re-read and retry
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


def stalls(status: int, tries: int, elapsed_s: float) -> bool:
    """Whether a failure reports Stalled: at once when only a person can fix it, else after
    ``STALL_AFTER`` failed passes in a row spanning at least ``STALL_AFTER_S`` seconds."""
    if not transient(status):
        return True
    return tries >= STALL_AFTER and elapsed_s >= STALL_AFTER_S


def verdict(
    failure: Failure,
    tries: int,
    elapsed_s: float = 0.0,
    extra: tuple[tuple[str, Status, str, str], ...] = (),
) -> Verdict:
    """What a pass reports after its ``tries``-th failure in a row (``tries`` >= 1), the
    first of them ``elapsed_s`` seconds ago."""
    how = classify(failure.status)
    if not how.transient:
        return Verdict("stalled", how.reason, f"{failure.message}; retrying with backoff", extra)
    if stalls(failure.status, tries, elapsed_s):
        text = (
            f"{failure.message}; still failing after {STALL_AFTER} tries over"
            f" {STALL_AFTER_S:.0f} s, retrying with backoff"
        )
        return Verdict("stalled", how.reason, text, extra)
    return Verdict("progressing", how.reason, f"{failure.message}; retrying", extra)


def reported(found: Iterable[Failure]) -> Failure | None:
    """The one failure a pass reports for the writes the API server refused: the same whatever
    order they finished in (a stage writes its nodes concurrently). The one only a person can
    fix comes first, then by message (which names the object); more than one are counted."""
    ordered = sorted(set(found), key=lambda f: (transient(f.status), f.message, f.status))
    if len(ordered) <= 1:
        return ordered[0] if ordered else None
    first = ordered[0]
    return Failure(first.status, f"{len(ordered)} writes refused; first: {first.message}")


def announces(
    verdict: Verdict,
    previous: Sequence[Mapping[str, Any]],
    *,
    loud: bool,
    wrote: bool,
    announce: bool,
) -> bool:
    """Whether a pass posts an Event on its object for ``verdict``; ``previous``: the
    conditions the object showed before the pass; ``loud``: the pass failed, or its spec cannot
    be acted on; ``wrote``: its status was written; ``announce``: the kind announces changes."""
    if verdict.state == "ready":
        return False  # Ready is no news worth an Event
    if loud:  # only when what it reports changed: no new Event on each retry of a stuck object
        shown = condition(previous, READY) or {}
        return (shown.get("reason"), shown.get("message")) != (verdict.reason, verdict.message)
    return wrote and announce  # a not-Ready verdict that changed the status


def counts_as_failed(failed: bool, status_written: bool) -> bool:
    """Whether a pass counts toward backoff and Stalled: it failed, or its status (what the
    user reads) could not be written — the next pass tries again, backing off."""
    return failed or not status_written


def backoff(tries: int, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_CAP_S) -> float:
    """Seconds before the next pass after ``tries`` failed passes in a row: ``base`` doubling
    with each failure up to ``cap``; 0 when the last pass succeeded (no backoff)."""
    if tries <= 0:
        return 0.0
    return min(cap, base * 2.0 ** min(tries - 1, 62))
