"""The writer Lease against the real API server: two replicas' holders, one namespace.

``test_peering`` runs whole operators; here two ``WriterLease`` objects play
the replicas directly, so the orderings that matter can be set up exactly: a
pass still running after its daemon was stopped keeps the Lease, a peer waits
for it, and the peer takes it the moment the last pass ends — or once a dead
holder's renewal is older than the duration.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tessera.adapters.kube import Kube, path_of
from tessera.controllers.writer_lease import LEASES, WriterLease

from .helpers import eventually, namespace

NS = "lease-test"


@pytest.fixture
def lease_name(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    namespace(kube, NS)
    name = request.node.name.removeprefix("test_").replace("_", "-")[:60]
    yield name
    kube.delete(path_of(LEASES, "leases", name, NS))


class Clock:
    """A clock the test moves: lease expiry without waiting for it."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def holder(kube: Kube, name: str) -> str:
    spec = kube.get(path_of(LEASES, "leases", name, NS)).get("spec") or {}
    return str(spec.get("holderIdentity") or "")


def test_a_pass_outliving_its_daemon_keeps_the_lease_until_it_ends(
    kube: Kube, lease_name: str
) -> None:
    clock = Clock()
    a = WriterLease(kube, NS, lease_name, "a", clock)
    b = WriterLease(kube, NS, lease_name, "b", clock)
    a.daemon_started()
    b.daemon_started()
    inside, leave = threading.Event(), threading.Event()

    def long_pass() -> None:
        with a.writing() as claim:
            assert claim.verdict == "held"
            inside.set()
            leave.wait(30)

    runner = threading.Thread(target=long_pass)
    runner.start()
    try:
        eventually(inside.is_set, 10, "a's pass holding the lease")
        assert holder(kube, lease_name) == "a"
        assert not a.daemon_stopped()  # kopf paused a; its pass thread still runs
        with b.writing() as claim:
            assert claim.verdict == "wait" and "held by a" in claim.reason, claim
        assert holder(kube, lease_name) == "a"
    finally:
        leave.set()
        runner.join(10)
    assert holder(kube, lease_name) == ""  # given back by the pass that ended last
    with b.writing() as claim:
        assert claim.verdict == "held", claim
    assert holder(kube, lease_name) == "b"
    assert b.daemon_stopped()  # the last daemon: its release is due
    b.release()
    assert holder(kube, lease_name) == ""


def test_a_dead_holder_is_waited_for_a_full_duration_of_our_own_clock(
    kube: Kube, lease_name: str
) -> None:
    clock = Clock()
    dead = WriterLease(kube, NS, lease_name, "dead", clock, duration_s=15)
    dead.daemon_started()
    with dead.writing() as claim:  # takes it, then "dies": never stops, never gives it back
        assert claim.verdict == "held"
    peer = WriterLease(kube, NS, lease_name, "peer", clock, duration_s=15)
    peer.daemon_started()
    with peer.writing() as claim:  # first sight of dead's record: the count starts here
        assert claim.verdict == "wait", claim
    clock.now += timedelta(seconds=14)
    with peer.writing() as claim:
        assert claim.verdict == "wait", claim
    clock.now += timedelta(seconds=2)
    with peer.writing() as claim:
        assert claim.verdict == "held" and "dead has not renewed it" in claim.reason, claim
    spec = kube.get(path_of(LEASES, "leases", lease_name, NS))["spec"]
    assert spec["holderIdentity"] == "peer" and spec["leaseTransitions"] == 2
    with dead.writing() as claim:  # back from the dead: it must not write
        assert claim.verdict == "wait", claim
    assert not dead.valid()
    peer.daemon_stopped()
    peer.release()
    assert holder(kube, lease_name) == ""


def test_a_lease_not_renewed_in_time_stops_new_stages_until_renewed(
    kube: Kube, lease_name: str
) -> None:
    clock = Clock()
    a = WriterLease(kube, NS, lease_name, "a", clock, duration_s=15)
    a.daemon_started()
    with a.writing() as claim:
        assert claim.verdict == "held" and a.valid()
    clock.now += timedelta(seconds=13)  # no pass ran, so nothing renewed it
    assert not a.valid()  # a pass asking now would start no further stage
    with a.writing() as claim:  # the next pass renews it first
        assert claim.verdict == "held" and a.valid()
    a.daemon_stopped()
    a.release()
