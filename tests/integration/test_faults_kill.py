"""The operator SIGKILLed mid-rollout: every few seconds through 30 nodes, and once in each phase.

A kill can land between any two writes of a pass. What must hold afterwards is
what ``test_faults.py`` checks for its faults (see ``faults.py``): the pool
converges, never more than ``maxUnavailable`` out, no PDB broken, each pod
evicted once, each layout requested once, nothing left cordoned by Tessera.
"""

from __future__ import annotations

import threading

import pytest

from builders import LAYOUT_A, custom
from devcluster import fleet
from tessera.adapters.kube import Kube

from .conftest import OperatorProcess
from .faults import (
    NPG,
    Witness,
    Workload,
    agents,
    assert_each_layout_requested_once,
    assert_released,
    kill_and_restart,
    pool_spec,
    restarted_at_exit,
    wait_ready,
)
from .helpers import eventually

__all__ = ["agents"]  # the module-scoped fixture, used by every test below


def test_operator_sigkilled_every_few_seconds_through_a_30_node_rollout(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool = "flt-kill30"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 30))
    # 5 replicas under minAvailable 4: their nodes drain one eviction at a time, each waiting
    # for the ReplicaSet's replacement to run on the spare before the budget allows the next
    work = Workload(kube, f"{pool}-ns", names[::6])
    stop = threading.Event()
    kills = 0
    steps: set[tuple[str, str]] = set()
    progressed = threading.Event()  # a (node, phase) persisted since the last restart

    def step(phase: str, node: str) -> None:
        if (node, phase) not in steps:
            steps.add((node, phase))
            progressed.set()

    def killer() -> None:
        nonlocal kills
        while not stop.wait(1.5):  # the fault's period, not synchronisation
            # ... once the operator persisted a step since it started: on a loaded machine its
            # start alone can take seconds, and kills on a clock would leave it no pass at all
            while not progressed.wait(1.0):
                if stop.is_set():
                    return
            kill_and_restart(operator)
            progressed.clear()
            kills += 1

    thread = threading.Thread(target=killer, daemon=True, name="killer")
    with restarted_at_exit(operator), Witness(kube, pool, work, step) as witness:
        kube.create(
            NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A, maxUnavailable=5))
        )
        thread.start()
        try:
            # A kill while an eviction is in flight can leave the PDB counting a disruption
            # whose pod was never deleted (the API server records it, then the request dies):
            # the disruption controller drops it after 2 min, and the drain waits that long.
            obj = wait_ready(kube, pool, 420, f"{pool} Ready despite the kills")
        finally:
            stop.set()
            thread.join(60)
    assert kills >= 3, kills
    assert obj["status"]["nodes"]["updated"] == 30
    assert witness.worst <= 5, witness.worst
    work.check()
    assert_released(kube, pool)
    assert_each_layout_requested_once(witness, kube, pool)


# Every phase a node is persisted in on its way through a rollout. Applying is persisted
# only when a layout is re-applied (a rollback, a spec changed mid-flight): a drained node
# goes from Draining straight to Verifying in the pass whose fresh pod list found it empty.
# Uncordoning never reaches the API server: the executor sends a node's release (state,
# taint, cordon, clear) as one patch, so there is no moment between them to be killed in.
PHASES = ["Cordoned", "Draining", "Verifying"]


@pytest.mark.parametrize("phase", PHASES)
def test_operator_sigkilled_in_each_phase_resumes(
    kube: Kube, operator: OperatorProcess, agents: None, phase: str
) -> None:
    pool = f"flt-phase-{phase.lower()}"
    specs = fleet.pool(pool, "H100-80GB", 2)
    admin = fleet.NodeSpec(f"{pool}-admin", "H100-80GB", pool=pool, unschedulable=True)
    names = fleet.create_nodes(kube, [*specs, admin])
    work = Workload(kube, f"{pool}-ns", names[:2])
    killed = threading.Event()

    def trip(seen: str, _: str) -> None:
        if seen == phase and not killed.is_set():
            operator.kill()
            killed.set()

    # out already: done first without a new slot; its cordon stays and counts (issue 34)
    cordoned = frozenset({admin.name})
    with (
        restarted_at_exit(operator),
        Witness(kube, pool, work, trip, admin_cordoned=cordoned) as witness,
    ):
        kube.create(
            NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A, maxUnavailable=2))
        )
        eventually(killed.is_set, 60, f"a node in phase {phase}")
        operator.start()
        # 90 s, plus 120 s when the kill cut an eviction in half: the API server had
        # granted it (the PDB counts the pod as disrupted) but the client went away
        # before the pod was deleted, and the disruption controller keeps that grant
        # for two minutes before the budget frees and the drain goes on.
        obj = wait_ready(kube, pool, 210, f"{pool} Ready after the kill")
    assert obj["status"]["nodes"]["updated"] == 3
    assert witness.worst <= 2, witness.worst
    work.check()
    assert_released(kube, pool, admin_cordoned=frozenset({admin.name}))
    assert_each_layout_requested_once(witness, kube, pool)
