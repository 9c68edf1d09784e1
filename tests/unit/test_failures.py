"""A failed pass: which condition it reports (by status and tries), and the backoff schedule."""

from __future__ import annotations

import pytest

from tessera.controllers.runtime import Streaks
from tessera.domain import failures
from tessera.domain.conditions import Status, Verdict
from tessera.domain.failures import STALL_AFTER, Failure

FORBIDDEN = (
    'resourcequotas "tessera-a" is forbidden: User "system:serviceaccount:tessera-system:tessera"'
    ' cannot patch resource "resourcequotas" in API group "" in the namespace "a-1"'
)


@pytest.mark.parametrize(
    ("status", "tries", "state", "reason"),
    [
        # transient: Reconciling until STALL_AFTER failed passes in a row, Stalled from then on
        (0, 1, "progressing", "APIUnreachable"),
        (409, 1, "progressing", "Conflict"),
        (429, STALL_AFTER - 1, "progressing", "Throttled"),
        (429, STALL_AFTER, "stalled", "Throttled"),
        (500, 1, "progressing", "APIServerError"),
        (503, STALL_AFTER + 3, "stalled", "APIServerError"),
        (404, 1, "progressing", "NotFound"),
        (failures.INTERNAL, 1, "progressing", "InternalError"),
        (failures.INTERNAL, STALL_AFTER, "stalled", "InternalError"),
        # only a person can fix these: Stalled at the first failure
        (403, 1, "stalled", "Forbidden"),
        (422, 1, "stalled", "Invalid"),
        (401, 1, "stalled", "Unauthorized"),
        (400, 1, "stalled", "BadRequest"),
        (405, 1, "stalled", "APIError"),
    ],
)
def test_a_failure_becomes_reconciling_or_stalled(
    status: int, tries: int, state: str, reason: str
) -> None:
    got = failures.verdict(Failure(status, f"{status} Whatever: the API's message"), tries)
    assert (got.state, got.reason) == (state, reason)
    assert got.message.startswith(f"{status} Whatever: the API's message")


def test_the_api_message_is_kept_whole_and_extra_conditions_stay() -> None:
    extra: tuple[tuple[str, Status, str, str], ...] = (("Overcommitted", "True", "Over", "6"),)
    got = failures.verdict(Failure(403, f"403 Forbidden: {FORBIDDEN}"), 1, extra)
    text = f"403 Forbidden: {FORBIDDEN}; retrying with backoff"
    assert got == Verdict("stalled", "Forbidden", text, extra)


def test_a_stalled_message_does_not_change_with_each_further_try() -> None:
    """The status (and the Event) are written once, not on every retry of a stuck object."""
    texts = {failures.verdict(Failure(503, "503 x"), n).message for n in range(STALL_AFTER, 20)}
    assert len(texts) == 1


@pytest.mark.parametrize("status", [0, 409, 429, 500, 502, 503, 504, 404])
def test_transient(status: int) -> None:
    assert failures.transient(status)


@pytest.mark.parametrize("status", [400, 401, 403, 405, 410, 415, 422])
def test_not_transient(status: int) -> None:
    assert not failures.transient(status)


@pytest.mark.parametrize(
    ("tries", "seconds"),
    [
        (0, 0.0),  # the last pass succeeded: no backoff (the reset)
        (1, 1.0),
        (2, 2.0),
        (3, 4.0),
        (6, 32.0),
        (7, 60.0),  # capped
        (40, 60.0),
        (10_000, 60.0),  # no overflow however long it fails
    ],
)
def test_backoff_doubles_from_one_second_to_the_cap(tries: int, seconds: float) -> None:
    assert failures.backoff(tries) == seconds


def test_backoff_takes_its_base_and_cap() -> None:
    assert [failures.backoff(n, base=0.5, cap=3.0) for n in range(6)] == [0, 0.5, 1, 2, 3, 3]


def test_failed_passes_count_per_object_and_a_success_resets_the_count() -> None:
    streaks = Streaks()
    assert [streaks.failed("tenantquotas", "a") for _ in range(3)] == [1, 2, 3]
    assert streaks.failed("tenantquotas", "b") == 1  # each object on its own
    assert streaks.failed("sharingpolicies", "a") == 1
    streaks.succeeded("tenantquotas", "a")
    assert streaks.failed("tenantquotas", "a") == 1  # backoff starts again at its base
    assert failures.backoff(streaks.failed("tenantquotas", "b")) == 2.0
