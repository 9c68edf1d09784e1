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
        a.daemon_stopped()  # kopf paused a; its pass thread still runs
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
    b.daemon_stopped()
    assert holder(kube, lease_name) == ""


def test_a_dead_holder_is_waited_for_until_its_renewal_expires(kube: Kube, lease_name: str) -> None:
    clock = Clock()
    dead = WriterLease(kube, NS, lease_name, "dead", clock, duration_s=15)
    dead.daemon_started()
    with dead.writing() as claim:  # takes it, then "dies": never stops, never gives it back
        assert claim.verdict == "held"
    peer = WriterLease(kube, NS, lease_name, "peer", clock, duration_s=15)
    peer.daemon_started()
    clock.now += timedelta(seconds=14)
    with peer.writing() as claim:
        assert claim.verdict == "wait", claim
    clock.now += timedelta(seconds=2)
    with peer.writing() as claim:
        assert claim.verdict == "held" and "dead stopped renewing" in claim.reason, claim
    lease = kube.get(path_of(LEASES, "leases", lease_name, NS))["spec"]
    assert lease["holderIdentity"] == "peer" and lease["leaseTransitions"] == 1
    with dead.writing() as claim:  # back from the dead: it must not write
        assert claim.verdict == "wait", claim
    peer.daemon_stopped()
