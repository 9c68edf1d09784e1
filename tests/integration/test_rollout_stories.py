"""Issue 13, items 3-6: what a platform engineer does to a pool mid-rollout, and what must hold.

Each test plays one story on the real control plane (simulated GPU agents and
kubelet) while a ``Ledger`` watches every Node and Pod event from outside:

* never more nodes held by Tessera — cordoned by it *or* carrying its taint —
  than ``maxUnavailable``;
* nothing written to a node before the plan is approved;
* nothing of Tessera's left on a node at the end (an admin's cordon stays);
* a pod on a node that was backed out is never evicted.

The fleet's nodes come without ``nvidia.com/mig.config``: an unlabelled pool,
the case that used to taint every node at once.
"""

from __future__ import annotations

from typing import Any

from devcluster import fleet
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from . import sharing_support as sharing
from .conftest import OperatorProcess
from .faults import (
    LAYOUT_A,
    LAYOUT_B,
    NPG,
    agents,
    assert_released,
    node_of,
    npg,
    pool_nodes,
    pool_spec,
    stalled,
    wait_ready,
)
from .helpers import condition, custom, eventually, namespace, owned_pod
from .rollout_ledger import Ledger

__all__ = ["agents"]  # the module-scoped fixture (simulated GPU agents and kubelet)
IMPOSSIBLE = {"mig": {"layouts": [{"profiles": {"4g.40gb": 2}}]}}  # one 4g per H100 at most


def _serving(kube: Kube, ns: str, node: str, min_available: int = 1) -> Obj:
    """A running GPU pod on ``node`` under a PDB that lets none of it go (minAvailable 1)."""
    namespace(kube, ns)
    owned_pod(kube, ns, "serve", node)
    kube.create(
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        {
            "metadata": {"name": "serve"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "serve"}}},
        },
    )
    pdb = path_of("policy/v1", "poddisruptionbudgets", "serve", ns)
    eventually(
        lambda: (kube.get(pdb).get("status") or {}).get("currentHealthy") == 1,
        60,
        "the serving pod Ready and counted by its PDB",
    )
    return kube.get(path_of("v1", "pods", "serve", ns))


def _phase(kube: Kube, node: str) -> str | None:
    return (node_of(kube, node)["metadata"].get("annotations") or {}).get(c.NODE_PHASE_ANNOTATION)


def _observed(kube: Kube, pool: str) -> Obj | None:
    """The pool once a pass has reconciled its current generation."""
    obj = npg(kube, pool)
    status = (obj or {}).get("status") or {}
    return (
        obj if obj and status.get("observedGeneration") == obj["metadata"]["generation"] else None
    )


def _clean(kube: Kube, name: str, admin: bool = False) -> bool:
    node = node_of(kube, name)
    taints = [t["key"] for t in node["spec"].get("taints") or []]
    annotations = node["metadata"].get("annotations") or {}
    return (
        bool(node["spec"].get("unschedulable")) == admin
        and c.GEOMETRY_PENDING_TAINT not in taints
        and c.NODE_STATE_ANNOTATION not in annotations
    )


def _spec(pool: str, layout: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    return pool_spec(pool, layout, **rollout)


def test_backing_out_mid_drain_releases_the_node_and_evicts_nothing(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Item 3: B over A, then A again while the node drains; the node leaves at once."""
    pool, ns = "story-backout", "story-backout-ns"
    (name,) = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    kube.create(NPG, custom("NodePoolGeometry", pool, _spec(pool, LAYOUT_A)))
    wait_ready(kube, pool, 90, "layout A applied")
    pod = _serving(kube, ns, name)
    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_B})
        eventually(lambda: _phase(kube, name) in ("Draining", "Blocked"), 60, "draining for B")

        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_A})  # git revert
        eventually(lambda: _observed(kube, pool), 60, "the revert reconciled")
        eventually(lambda: _clean(kube, name), 30, f"{name} released: uncordoned, no taint/state")
        # Now the PDB would let the pod go: a rollout still draining would evict it.
        pdb = path_of("policy/v1", "poddisruptionbudgets", "serve", ns)
        kube.patch(pdb, {"spec": {"minAvailable": 0}})
        eventually(
            lambda: (kube.get(pdb).get("status") or {}).get("disruptionsAllowed") == 1,
            60,
            "the PDB allowing a disruption",
        )
        wait_ready(kube, pool, 60, f"{pool} Ready on layout A")
        obj = npg(kube, pool)
        assert obj is not None and obj["status"]["plan"]["podsToEvict"] == 0, obj["status"]
        live = kube.get(path_of("v1", "pods", "serve", ns))
        assert live["metadata"]["uid"] == pod["metadata"]["uid"]
        assert not live["metadata"].get("deletionTimestamp")
    assert ledger.evicted == {}, ledger.evicted
    assert ledger.worst <= 1, ledger.worst
    assert_released(kube, pool)


def test_waiting_for_approval_writes_nothing_and_the_taint_stays_in_the_budget(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Item 4: an unlabelled, serving pool under Manual approval and maxUnavailable 2."""
    pool, ns = "story-approval", "story-approval-ns"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 4))
    namespace(kube, ns)
    for i, name in enumerate(names):
        owned_pod(kube, ns, f"serve-{i}", name)
    with Ledger(kube, pool) as ledger:
        spec = _spec(pool, LAYOUT_A, approval="Manual", maxUnavailable=2)
        kube.create(NPG, custom("NodePoolGeometry", pool, spec))

        def waiting() -> Obj | None:
            obj = _observed(kube, pool)
            cond = condition(obj, "Reconciling")
            return obj if cond and cond.get("reason") == "WaitingForApproval" else None

        obj = eventually(waiting, 60, "WaitingForApproval")
        # The pass that wrote this status had already made its node writes, if any.
        assert ledger.early == [], ledger.early
        for name in names:
            assert _clean(kube, name), node_of(kube, name)["spec"]

        ledger.gate_open.set()
        digest = obj["status"]["plan"]["hash"]
        approve = {"metadata": {"annotations": {c.APPROVE_PLAN_ANNOTATION: digest}}}
        kube.patch(f"{NPG}/{pool}", approve)
        wait_ready(kube, pool, 180, f"{pool} Ready after approval")
    assert ledger.early == [], ledger.early
    assert 0 < ledger.worst <= 2, ledger.worst
    assert_released(kube, pool)


def test_an_admin_cordoned_node_does_not_stall_the_pool(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Item 5: maxUnavailable 1 and two nodes cordoned by someone else before the rollout.

    Tessera changes them one at a time too: each carries its taint while it is changed.
    """
    pool = "story-cordon"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 3))
    admins = frozenset(names[:2])
    for admin in admins:  # kubectl cordon
        kube.patch(path_of("v1", "nodes", admin), {"spec": {"unschedulable": True}})
    with Ledger(kube, pool, admin_cordoned=admins) as ledger:
        ledger.gate_open.set()
        spec = _spec(pool, LAYOUT_A, maxUnavailable=1)
        kube.create(NPG, custom("NodePoolGeometry", pool, spec))
        wait_ready(kube, pool, 180, f"{pool} Ready with {sorted(admins)} cordoned by an admin")
    assert ledger.worst <= 1, ledger.worst
    assert_released(kube, pool, admin_cordoned=admins)
    for node in pool_nodes(kube, pool):
        assert node["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] == "success"


def test_an_impossible_layout_mid_rollout_leaves_no_taint_or_cordon(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Item 6: switch to an impossible layout while the first node drains; Stalled holds nothing."""
    pool, ns = "story-invalid", "story-invalid-ns"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 3))
    _serving(kube, ns, names[0])  # keeps its node draining: a pod under a PDB of minAvailable 1
    for name in names[1:]:  # so the draining node is the one with the fewest pods to move
        owned_pod(kube, ns, f"busy-{name}", name)
        owned_pod(kube, ns, f"busier-{name}", name)
    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.create(NPG, custom("NodePoolGeometry", pool, _spec(pool, LAYOUT_A)))
        eventually(lambda: _phase(kube, names[0]) == "Draining", 60, f"{names[0]} draining")

        kube.patch(f"{NPG}/{pool}", {"spec": IMPOSSIBLE})
        cond = eventually(lambda: stalled(kube, pool), 60, "Stalled on the impossible layout")
        assert cond["reason"] == "InvalidGeometryForModel", cond
        eventually(
            lambda: all(_clean(kube, n) for n in names), 30, "no taint, cordon or state left"
        )
        assert stalled(kube, pool), "still Stalled"
    assert ledger.worst <= 1, ledger.worst
    assert "serve" not in ledger.evicted.values(), ledger.evicted
    assert_released(kube, pool)


def test_a_pool_in_conflict_mid_drain_is_stalled_only_once_it_holds_nothing(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Items 2 and 6: a second pool over the same label while a node drains, and a new node
    both select. The first pool starts nothing more, finishes its draining node
    (Reconciling, reason Conflict), and says Stalled only once no cordon or taint is its."""
    pool, ns, typo = "story-clash", "story-clash-ns", "story-clash-b"
    (name,) = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    _serving(kube, ns, name)
    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.create(NPG, custom("NodePoolGeometry", pool, _spec(pool, LAYOUT_A)))
        eventually(lambda: _phase(kube, name) == "Draining", 60, f"{name} draining")
        kube.create(NPG, custom("NodePoolGeometry", typo, _spec(pool, LAYOUT_B)))
        (new,) = fleet.create_nodes(kube, [fleet.NodeSpec(f"{pool}-1", "H100-80GB", pool=pool)])

        def finishing() -> dict[str, Any] | None:
            obj = _observed(kube, pool)
            cond = condition(obj, "Reconciling")
            ok = cond and cond["status"] == "True" and cond["reason"] == "Conflict"
            return (
                cond if ok and "finishing the 1 node already in flight" in cond["message"] else None
            )

        cond = eventually(finishing, 60, f"{pool} Reconciling/Conflict while {name} drains")
        assert f"nodepoolgeometry/{typo}" in cond["message"] and new in cond["message"], cond
        assert not stalled(kube, pool), "Stalled while its own cordon is on a node"
        assert _phase(kube, name) in ("Draining", "Blocked")

        pdb = path_of("policy/v1", "poddisruptionbudgets", "serve", ns)
        kube.patch(pdb, {"spec": {"minAvailable": 0}})  # the drain may finish now
        cond = eventually(lambda: stalled(kube, pool), 120, f"{pool} Stalled once {name} is done")
        assert cond["reason"] == "Conflict", cond
        assert _clean(kube, name) and _clean(kube, new), "a Stalled pool holds nothing"
        kube.delete(f"{NPG}/{typo}")
        wait_ready(kube, pool, 120, f"{pool} Ready once {typo} is gone")
    assert ledger.worst <= 1, ledger.worst
    assert_released(kube, pool)


def test_reverting_a_sharing_backend_switch_mid_drain_evicts_nothing(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Item 3, SharingPolicy: MPS -> TimeSlicing, reverted while the node drains."""
    pool, ns = "story-sp-revert", "story-sp-revert-ns"
    names = sharing.nodes(kube, pool, 1, "none")  # MPS needs migStrategy none
    sharing.create_policy(kube, pool, pool, "MPS", mps={"replicas": 2})
    mps_key = sharing.wait_ready(kube, pool)["status"]["configKey"]
    eventually(
        lambda: sharing.settled(kube, names[0]) and sharing.allocatable(kube, names[0]) == 16,
        60,
        "MPS on",
    )
    pod = _serving(kube, ns, names[0])
    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        switch = {"backend": "TimeSlicing", "mps": None, "timeSlicing": {"replicas": 4}}
        kube.patch(f"{sharing.SP}/{pool}", {"spec": switch})
        eventually(lambda: _phase(kube, names[0]) == "Draining", 60, "draining for TimeSlicing")

        revert = {"backend": "MPS", "timeSlicing": None, "mps": {"replicas": 2}}
        kube.patch(f"{sharing.SP}/{pool}", {"spec": revert})
        eventually(lambda: _clean(kube, names[0]), 30, f"{names[0]} released at once")
        pdb = path_of("policy/v1", "poddisruptionbudgets", "serve", ns)
        kube.patch(pdb, {"spec": {"minAvailable": 0}})
        eventually(
            lambda: (kube.get(pdb).get("status") or {}).get("disruptionsAllowed") == 1,
            60,
            "the PDB allowing a disruption",
        )
        assert sharing.wait_ready(kube, pool)["status"]["configKey"] == mps_key
        live = kube.get(path_of("v1", "pods", "serve", ns))
        assert live["metadata"]["uid"] == pod["metadata"]["uid"]
        assert not live["metadata"].get("deletionTimestamp")
    assert ledger.evicted == {}, ledger.evicted
    assert ledger.worst <= 1, ledger.worst
    assert sharing.label(kube, names[0]) == mps_key and sharing.allocatable(kube, names[0]) == 16
    assert sharing.settled(kube, names[0])
