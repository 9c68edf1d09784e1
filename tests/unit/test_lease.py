"""The writer Lease decision: who holds it, who may take it, who waits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tessera.domain import lease

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def held_by(holder: str, renewed_ago: float | None, duration_s: int = 15) -> lease.LeaseView:
    renewed = None if renewed_ago is None else NOW - timedelta(seconds=renewed_ago)
    return lease.LeaseView(holder, renewed, duration_s, transitions=3)


@pytest.mark.parametrize(
    ("view", "verdict", "reason"),
    [
        (lease.LeaseView(), "take", "released"),
        (held_by("", 1), "take", "released"),
        (held_by("me", 1), "held", "held by me"),
        (held_by("me", 600), "held", "held by me"),  # expired, but nobody took it: still mine
        (held_by("peer", 1), "wait", "held by peer for up to 14 s more"),
        (held_by("peer", 14.5), "wait", "held by peer for up to 0 s more"),
        (held_by("peer", 15), "take", "peer stopped renewing it at 2026-11-29T11:59:45.000000Z"),
        (held_by("peer", None), "take", "peer never renewed it"),
    ],
)
def test_claim(view: lease.LeaseView, verdict: str, reason: str) -> None:
    got = lease.claim(view, "me", NOW)
    assert (got.verdict, got.reason) == (verdict, reason)


def test_view_of_reads_the_api_servers_micro_time_and_survives_garbage() -> None:
    spec = {
        "holderIdentity": "peer",
        "renewTime": "2026-11-29T11:59:50.123456Z",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 2,
    }
    assert lease.view_of(spec) == lease.LeaseView(
        "peer", datetime(2026, 11, 29, 11, 59, 50, 123456, tzinfo=UTC), 15, 2
    )
    assert lease.view_of({"holderIdentity": "peer", "renewTime": "yesterday"}).renewed is None
    assert lease.view_of(None) == lease.LeaseView()


def test_taking_from_a_peer_counts_a_transition_and_stamps_acquire_time() -> None:
    taken = lease.spec_for(held_by("peer", 30), "me", NOW, 15)
    assert taken == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "renewTime": "2026-11-29T12:00:00.000000Z",
        "acquireTime": "2026-11-29T12:00:00.000000Z",
        "leaseTransitions": 4,
    }
    renewed = lease.spec_for(held_by("me", 5), "me", NOW, 15)
    assert "acquireTime" not in renewed and renewed["leaseTransitions"] == 3
    assert lease.spec_for(lease.LeaseView(), "me", NOW, 15)["leaseTransitions"] == 0


def test_release_clears_the_holder_and_round_trips_as_released() -> None:
    spec = lease.released_spec(held_by("me", 2), NOW)
    assert spec["holderIdentity"] is None
    assert lease.claim(lease.view_of(spec), "peer", NOW).verdict == "take"
