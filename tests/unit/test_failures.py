"""A failed pass: which condition it reports (by status and tries), and the backoff schedule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tessera.controllers.runtime import Streak, Streaks
from tessera.domain.base import failures
from tessera.domain.base.conditions import Status, Verdict
from tessera.domain.base.failures import STALL_AFTER, STALL_AFTER_S, Failure

FORBIDDEN = (
    'resourcequotas "tessera-a" is forbidden: User "system:serviceaccount:tessera-system:tessera"'
    ' cannot patch resource "resourcequotas" in API group "" in the namespace "a-1"'
)


@pytest.mark.parametrize(
    ("status", "tries", "state", "reason"),
    [
        # transient: Reconciling until STALL_AFTER failed passes in a row over STALL_AFTER_S,
        # Stalled from then on (here all over a long enough time; the time: test_stalls)
        (0, 1, "progressing", "APIUnreachable"),
        (409, 1, "progressing", "APIConflict"),
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
    failure = Failure(status, f"{status} Whatever: the API's message")
    got = failures.verdict(failure, tries, STALL_AFTER_S)
    assert (got.state, got.reason) == (state, reason)
    assert got.message.startswith(f"{status} Whatever: the API's message")


def test_the_api_message_is_kept_whole_and_extra_conditions_stay() -> None:
    extra: tuple[tuple[str, Status, str, str], ...] = (("Overcommitted", "True", "Over", "6"),)
    got = failures.verdict(Failure(403, f"403 Forbidden: {FORBIDDEN}"), 1, extra=extra)
    text = f"403 Forbidden: {FORBIDDEN}; retrying with backoff"
    assert got == Verdict("stalled", "Forbidden", text, extra)


def test_a_stalled_message_does_not_change_with_each_further_try() -> None:
    """The status (and the Event) are written once, not on every retry of a stuck object."""
    texts = {
        failures.verdict(Failure(503, "503 x"), n, STALL_AFTER_S + n).message
        for n in range(STALL_AFTER, 20)
    }
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
    streaks, t0 = Streaks(), datetime(2026, 1, 1, tzinfo=UTC)
    at = [t0 + timedelta(seconds=s) for s in range(4)]
    assert [streaks.failed("tenantquotas", "a", t) for t in at[:3]] == [
        Streak(1, t0),
        Streak(2, t0),  # the streak keeps the time of its first failure
        Streak(3, t0),
    ]
    assert streaks.failed("tenantquotas", "b", at[1]) == Streak(1, at[1])  # each on its own
    assert streaks.failed("sharingpolicies", "a", at[1]).tries == 1
    streaks.succeeded("tenantquotas", "a")
    assert streaks.failed("tenantquotas", "a", at[3]) == Streak(1, at[3])  # afresh
    assert failures.backoff(streaks.failed("tenantquotas", "b", at[3]).tries) == 2.0


@pytest.mark.parametrize(
    ("status", "tries", "elapsed_s", "stalls"),
    [
        # only a person can fix it: at once
        (403, 1, 0.0, True),
        (422, 1, 0.0, True),
        # transient: five failures within seconds (wake-ups skip the backoff) are not Stalled
        (503, STALL_AFTER, 3.0, False),
        (429, STALL_AFTER + 10, STALL_AFTER_S - 1, False),
        # ... nor one long failure that was retried fewer times
        (0, STALL_AFTER - 1, 3600.0, False),
        # both: Stalled
        (503, STALL_AFTER, STALL_AFTER_S, True),
        (409, STALL_AFTER + 1, 600.0, True),
        (failures.INTERNAL, STALL_AFTER, STALL_AFTER_S, True),
    ],
)
def test_a_transient_failure_stalls_after_n_tries_and_a_minimum_time(
    status: int, tries: int, elapsed_s: float, stalls: bool
) -> None:
    assert failures.stalls(status, tries, elapsed_s) is stalls
    state = failures.verdict(Failure(status, "x"), tries, elapsed_s).state
    assert state == ("stalled" if stalls else "progressing")
