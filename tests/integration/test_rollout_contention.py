"""A pool says Ready only once its writes to the nodes have landed.

Nodes are written by many hands (feature discovery, a node labeller, the node
problem detector, the kubelet). Tessera's node writes are conditional on what it
read, so one of them can meet a 409 Conflict — the next pass re-plans and retries.
The pass whose writes did not land must not report the verdict it planned as if
they had: a pool Ready while its last node is still cordoned and Verifying is a
false green (seen as a flaky failure of the rollout stories under load).
"""

from __future__ import annotations

import threading

from builders import LAYOUT_A, LAYOUT_B, custom
from devcluster import fleet
from tessera.adapters.kube import Kube, path_of

from .conftest import OperatorProcess
from .faults import NPG, agents, assert_released, pool_spec, wait_ready

__all__ = ["agents"]  # the module-scoped fixture (simulated GPU agents)


def test_a_pool_is_ready_only_once_its_node_writes_have_landed(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool = "contention"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    stop = threading.Event()

    def labeller() -> None:  # another controller, relabelling the nodes all the time
        touch = 0
        while not stop.is_set():
            touch += 1
            for name in names:
                label = {"metadata": {"labels": {"labeller.example/touch": str(touch)}}}
                kube.patch(path_of("v1", "nodes", name), label)
            stop.wait(0.005)  # pacing the writes, not a synchronisation

    thread = threading.Thread(target=labeller, daemon=True, name="labeller")
    thread.start()
    try:
        kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
        for layout in (LAYOUT_B, LAYOUT_A, None):  # three rollouts: three last passes to race
            wait_ready(kube, pool, 120, f"{pool} Ready while the nodes are relabelled")
            assert_released(kube, pool)  # Ready: nothing of Tessera's is left on any node
            if layout is not None:
                kube.patch(f"{NPG}/{pool}", {"spec": layout})
    finally:
        stop.set()
        thread.join()
