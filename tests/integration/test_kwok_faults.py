"""A KWOK node that stops heartbeating goes NotReady, and a rollout treats it as the README says.

KWOK renews the Lease of every node it holds (``kwok.x-k8s.io/node: fake``), as a kubelet does;
a node whose Lease is not renewed for the controller-manager's node-monitor grace period (50 s)
is marked ``Ready: Unknown`` and tainted ``node.kubernetes.io/unreachable`` by the real
node-lifecycle controller. Removing KWOK's annotation does not stop the heartbeats (KWOK v0.8.0
filters the update out of its node watch but keeps holding, and renewing, the Lease until the
node is deleted), so the test plays a hung kubelet the way KWOK itself recognises one: another
holder owns the node's Lease, KWOK stops renewing it and leaves the node (and its pods) alone;
giving the Lease back lets KWOK take the node over again and report it Ready.

What docs/geometry.md promises ("What a rollout holds, and when", linked from the README): the budget counts every node that
is NotReady, and when NotReady nodes use up the budget the pool stays ``Reconciling`` and names
them; Tessera does not start (cordon, taint, drain) a NotReady node.
"""

from __future__ import annotations

from datetime import UTC, datetime

from builders import LAYOUT_A, custom
from devcluster import fleet
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .faults import (
    NPG,
    Witness,
    agents,
    assert_each_layout_requested_once,
    assert_released,
    node_of,
    npg,
    pool_spec,
    restarted_at_exit,
    wait_ready,
)
from .helpers import condition, eventually

__all__ = ["agents"]  # the module-scoped fixture: the simulated GPU agents
UNREACHABLE = "node.kubernetes.io/unreachable"
HUNG = "hung-kubelet"  # the Lease's holder while the node's kubelet does not answer
# node-monitor-grace-period (50 s) + node-monitor-period (5 s), with room for a loaded machine
NOT_READY_WITHIN = 120


def lease(node: str) -> str:
    return path_of("coordination.k8s.io/v1", "leases", node, "kube-node-lease")


def stop_heartbeats(kube: Kube, node: str) -> None:
    """The node's kubelet hangs: its Lease is held elsewhere for an hour, so KWOK stops
    renewing it and stops playing the node's kubelet (node status and pods)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {"holderIdentity": HUNG, "renewTime": now, "leaseDurationSeconds": 3600}
    kube.patch(lease(node), {"spec": spec})


def resume_heartbeats(kube: Kube, node: str) -> None:
    """The kubelet is back: the Lease is free, KWOK takes it and reports the node Ready."""
    kube.patch(lease(node), {"spec": {"holderIdentity": None}})


def taints(kube: Kube, node: str) -> set[str]:
    return {t["key"] for t in node_of(kube, node)["spec"].get("taints") or []}


def not_ready(kube: Kube, node: str) -> bool:
    status = (condition(node_of(kube, node), "Ready") or {}).get("status")
    return status == "Unknown" and UNREACHABLE in taints(kube, node)


def reconciling(kube: Kube, pool: str) -> dict[str, str] | None:
    obj = npg(kube, pool)
    cond = condition(obj, "Reconciling")
    fresh = obj and obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return cond if fresh and cond and cond["status"] == "True" else None


def test_a_node_that_stops_heartbeating_holds_the_budget_and_is_not_started(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool = "kwok-notready"
    hung, healthy = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 2))
    with restarted_at_exit(operator), Witness(kube, pool) as witness:
        stop_heartbeats(kube, hung)
        try:
            eventually(
                lambda: not_ready(kube, hung), NOT_READY_WITHIN, f"{hung} NotReady (unreachable)"
            )
            kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))

            def waiting() -> dict[str, str] | None:
                cond = reconciling(kube, pool)
                return cond if cond and f"{hung} " in cond["message"] else None

            def held() -> dict[str, str] | None:
                cond = waiting()
                return cond if cond and cond["reason"] == "BudgetHeldByOthers" else None

            # the NotReady node holds the only slot: the budget is someone else's (issue 34)
            cond = eventually(held, 60, f"{pool} Reconciling, naming {hung}")
            assert cond["message"] == (
                f"budget held by others: {hung} NotReady (1 of 1 in use); 0 of 2 nodes updated"
            ), cond
            for name in (hung, healthy):  # neither started: the NotReady node holds the only slot
                node = node_of(kube, name)
                assert not node["spec"].get("unschedulable"), name
                assert c.GEOMETRY_PENDING_TAINT not in taints(kube, name), name
                assert c.NODE_STATE_ANNOTATION not in (node["metadata"].get("annotations") or {})
            assert witness.phases == set(), witness.phases
        finally:  # the kubelet comes back (whatever happened: no node is left NotReady)
            resume_heartbeats(kube, hung)
        obj = wait_ready(kube, pool, 120, f"{pool} Ready once {hung} is back")
    assert obj["status"]["nodes"]["updated"] == 2
    assert witness.worst <= 1, witness.worst  # NotReady counted: never it and another held
    # the node-lifecycle controller lifts its taint on its next pass over the Ready node
    eventually(lambda: UNREACHABLE not in taints(kube, hung), 30, f"{UNREACHABLE} off {hung}")
    assert_released(kube, pool)
    assert_each_layout_requested_once(witness, kube, pool)
