"""The writer Lease decision: who holds it, who may take it, who waits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tessera.domain.base import lease

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def held_by(holder: str, duration_s: int = 15) -> lease.LeaseView:
    return lease.LeaseView(holder, "2026-11-29T11:00:00.000000Z", duration_s, 3, "t0")


@pytest.mark.parametrize(
    ("view", "seen_for", "verdict", "reason"),
    [
        (lease.LeaseView(), 0, "take", "released"),
        (held_by(""), 0, "take", "released"),
        (held_by("me"), 0, "held", "held by me"),
        (held_by("me"), 600, "held", "held by me"),  # unrenewed, but nobody took it: still mine
        (held_by("peer"), 1, "wait", "held by peer for up to 14 s more"),
        (held_by("peer"), 14.5, "wait", "held by peer for up to 0 s more"),
        (held_by("peer"), 15, "take", "peer has not renewed it for 15 s"),
        # Its renewTime says an hour ago, but we only just saw it: clocks may differ, so wait.
        (held_by("peer"), 0, "wait", "held by peer for up to 15 s more"),
    ],
)
def test_claim(view: lease.LeaseView, seen_for: float, verdict: str, reason: str) -> None:
    got = lease.claim(view, "me", NOW, ago(seen_for))
    assert (got.verdict, got.reason) == (verdict, reason)


def test_a_renewal_is_a_new_record_and_a_new_holder_too() -> None:
    base = held_by("peer")
    assert lease.LeaseView("peer", "later", 15, 3).record != base.record
    assert lease.LeaseView("other", base.renew_time, 15, 3).record != base.record
    assert lease.LeaseView("peer", base.renew_time, 30, 4).record == base.record


def test_view_of_reads_the_spec_as_written() -> None:
    spec = {
        "holderIdentity": "peer",
        "renewTime": "2026-11-29T11:59:50.123456Z",
        "acquireTime": "2026-11-29T11:00:00.000000Z",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 2,
    }
    assert lease.view_of(spec) == lease.LeaseView(
        "peer", "2026-11-29T11:59:50.123456Z", 15, 2, "2026-11-29T11:00:00.000000Z"
    )
    assert lease.view_of(None) == lease.LeaseView()


def test_taking_counts_a_transition_and_stamps_acquire_time_renewing_keeps_it() -> None:
    taken = lease.spec_for(held_by("peer"), "me", NOW, 15)
    assert taken == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2026-11-29T12:00:00.000000Z",
        "renewTime": "2026-11-29T12:00:00.000000Z",
        "leaseTransitions": 4,
    }
    renewed = lease.spec_for(held_by("me"), "me", NOW, 15)
    assert renewed["acquireTime"] == "t0" and renewed["leaseTransitions"] == 3
    assert lease.spec_for(lease.LeaseView(), "me", NOW, 15)["leaseTransitions"] == 1


def test_release_clears_the_holder_keeps_the_history_and_reads_as_released() -> None:
    spec = lease.released_spec(held_by("me"), NOW)
    assert spec["holderIdentity"] is None and spec["acquireTime"] == "t0"
    assert spec["leaseTransitions"] == 3
    assert lease.claim(lease.view_of(spec), "peer", NOW, NOW).verdict == "take"


@pytest.mark.parametrize(
    ("since", "usable", "fresh"),
    [
        (0, True, True),
        (7.4, True, True),
        (7.5, True, False),
        (11.9, True, False),
        (12, False, False),
    ],
)
def test_how_long_a_held_lease_is_trusted(since: float, usable: bool, fresh: bool) -> None:
    assert (lease.usable(since, 15), lease.fresh(since, 15)) == (usable, fresh)
    assert lease.renew_period(15) == 5  # renewed three times within one duration


def test_a_lease_taken_distrusts_the_node_cache_before_any_pass_can_see_it_held() -> None:
    """A peer's last cordons may not be in this replica's node cache yet (``NodeCache``)."""
    from typing import Any, cast

    from tessera.adapters.kube import Kube
    from tessera.controllers.writer_lease import WriterLease

    class Leases:
        def get_or_none(self, path: str) -> None:
            return None

        def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
            return body

    writer = WriterLease(cast(Kube, Leases()), "tessera-system", "writer", "me", lambda: NOW)
    seen: list[bool] = []
    writer.on_taken = lambda: seen.append(writer._held)  # a pass starting now sees it held
    assert writer._write_claim().verdict == "held"
    assert seen == [False]
    assert writer._fresh()
    writer._write_claim()  # renewed, not taken again
    assert seen == [False]
