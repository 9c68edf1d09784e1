"""Issue 13, items 3-6, and issue 14, item 4: what a platform engineer does to a pool
mid-rollout, and what must hold.

Each test plays one story on the real control plane (kube-scheduler places the
Deployments' replicas, KWOK runs them, simulated GPU agents change the nodes)
while a ``Ledger`` watches every Node and Pod event from outside:

* never more nodes held by Tessera — cordoned by it *or* carrying its taint —
  than ``maxUnavailable``;
* nothing written to a node before the plan is approved;
* nothing of Tessera's left on a node at the end (an admin's cordon stays);
* a pod on a node that was backed out is never evicted;
* no PDB ever violated (the fewest Ready replicas seen, per Deployment), and
  every evicted replica Running again, placed by the scheduler, at the end.

The fleet's nodes come without ``nvidia.com/mig.config``: an unlabelled pool,
the case that used to taint every node at once. A story whose single node must
drain gets a spare node outside the pool that its workload may use, so the
drain is held up by the PDB the story is about, never for want of room.
"""

from __future__ import annotations

import re
from typing import Any

from builders import LAYOUT_A, LAYOUT_B, DeploymentWrapper, custom
from devcluster import fleet
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from . import sharing_support as sharing
from . import story_support as story
from .conftest import OperatorProcess
from .faults import (
    NPG,
    agents,
    assert_released,
    events,
    node_of,
    npg,
    pool_nodes,
    pool_spec,
    stalled,
    wait_ready,
)
from .helpers import condition, eventually, namespace, nodes_of, serve, wait_running
from .rollout_ledger import Ledger

__all__ = ["agents"]  # the module-scoped fixture (simulated GPU agents)
BUDGET_HELD = "BudgetHeldByOthers"  # others' unavailable nodes use up maxUnavailable
IMPOSSIBLE = {"mig": {"layouts": [{"profiles": {"4g.40gb": 2}}]}}  # one 4g per H100 at most


def test_backing_out_mid_drain_releases_the_node_and_evicts_nothing(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Item 3: B over A, then A again while the node drains; the node leaves at once."""
    pool, ns = "story-backout", "story-backout-ns"
    (name,) = fleet.create_nodes(kube, story.nodes(pool))
    kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
    wait_ready(kube, pool, 90, "layout A applied")
    pod = story.serving(kube, ns, pool, story.MIG_1G)  # layouts A and B both have 1g.10gb slices
    assert nodes_of([pod]) == [name]
    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_B})
        eventually(lambda: story.phase(kube, name) in ("Draining", "Blocked"), 60, "draining for B")

        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_A})  # git revert
        eventually(lambda: story.observed(kube, pool), 60, "the revert reconciled")
        eventually(lambda: story.clean(kube, name), 30, f"{name} uncordoned, no taint/state")
        # Now the PDB would let the pod go: a rollout still draining would evict it.
        story.relax(kube, ns)
        wait_ready(kube, pool, 60, f"{pool} Ready on layout A")
        obj = npg(kube, pool)
        assert obj is not None and obj["status"]["plan"]["podsToEvict"] == 0, obj["status"]
        story.same_replica(kube, ns, pod)
    assert ledger.evicted == {}, ledger.evicted
    assert ledger.worst <= 1, ledger.worst
    assert_released(kube, pool)


def test_waiting_for_approval_writes_nothing_and_the_taint_stays_in_the_budget(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Item 4: an unlabelled, serving pool under Manual approval and maxUnavailable 2.

    The layout keeps GPUs 4-7 whole, so the evicted replicas (asking a GPU) run again.
    """
    pool, ns = "story-approval", "story-approval-ns"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 4))
    namespace(kube, ns)
    before = serve(kube, ns, "serve", pool=pool, replicas=4)
    with Ledger(kube, pool, ns) as ledger:
        spec = pool_spec(pool, story.HALF_MIG, approval="Manual", maxUnavailable=2)
        kube.create(NPG, custom("NodePoolGeometry", pool, spec))

        def waiting() -> Obj | None:
            obj = story.observed(kube, pool)
            cond = condition(obj, "Reconciling")
            return obj if cond and cond.get("reason") == "WaitingForApproval" else None

        obj = eventually(waiting, 60, "WaitingForApproval")
        # The pass that wrote this status had already made its node writes, if any.
        assert ledger.early == [], ledger.early
        for name in names:
            assert story.clean(kube, name), node_of(kube, name)["spec"]

        ledger.gate_open.set()
        digest = obj["status"]["plan"]["hash"]
        approve = {"metadata": {"annotations": {c.APPROVE_PLAN_ANNOTATION: digest}}}
        kube.patch(f"{NPG}/{pool}", approve)
        wait_ready(kube, pool, 180, f"{pool} Ready after approval")
        after = wait_running(kube, ns, "serve", 4)
    assert ledger.early == [], ledger.early
    assert 0 < ledger.worst <= 2, ledger.worst
    story.assert_replaced(ledger.evicted, before, after)
    assert_released(kube, pool)


def cordon(kube: Kube, node: str, on: bool) -> None:
    """``kubectl cordon`` (or ``uncordon``), as the admin."""
    kube.patch(path_of("v1", "nodes", node), {"spec": {"unschedulable": on}})


def held_by_others(kube: Kube, pool: str, message: str) -> dict[str, Any] | None:
    """The pool's ``Reconciling`` condition once it says others hold its budget: ``message``."""
    cond = condition(story.observed(kube, pool), "Reconciling")
    ok = cond and cond["reason"] == BUDGET_HELD and cond["message"].startswith(message)
    return cond if ok else None


def budget_gauge(operator: OperatorProcess, pool: str, reason: str) -> float | None:
    """``tessera_rollout_budget_nodes`` for the pool and ``reason``, as /metrics shows it."""
    labels = f'kind="NodePoolGeometry",pool="{pool}",reason="{reason}"'
    found = re.search(
        rf"^tessera_rollout_budget_nodes\{{{labels}\}} (\S+)$", operator.scrape(), re.M
    )
    return float(found.group(1)) if found else None


def test_an_admin_cordon_on_a_node_needing_no_change_holds_the_budget_until_uncordoned(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Issue 34: maxUnavailable 1; an admin cordons a node that already runs the layout, then
    two nodes join the pool. The one slot is the admin's: nothing starts, and the pool says
    so (condition, Event, metric); the admin's uncordon lets the rollout go on by itself.
    Never more than one node of the pool out of scheduling at once, whoever set it."""
    pool = "story-held"
    (admin,) = fleet.create_nodes(kube, [fleet.NodeSpec(f"{pool}-0", "H100-80GB", pool=pool)])
    kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A, maxUnavailable=1)))
    wait_ready(kube, pool, 90, f"{admin} on layout A")
    cordon(kube, admin, True)  # it needs no change: Tessera has nothing to do on it
    with Ledger(kube, pool, admin_cordoned=frozenset({admin})) as ledger:
        ledger.gate_open.set()
        joining = [fleet.NodeSpec(f"{pool}-{i}", "H100-80GB", pool=pool) for i in (1, 2)]
        others = fleet.create_nodes(kube, joining)  # returns once they are Ready
        said = f"budget held by others: {admin} cordoned by someone else (1 of 1 in use)"
        cond = eventually(lambda: held_by_others(kube, pool, said), 60, "the budget the admin's")
        assert cond["message"] == f"{said}; 1 of 3 nodes updated", cond
        assert ledger.started == [], ledger.started
        for name in others:
            assert story.clean(kube, name), node_of(kube, name)["spec"]
        warned = eventually(lambda: events(kube, pool, BUDGET_HELD), 30, "an Event on the pool")
        assert any(e["type"] == "Warning" and said in e["message"] for e in warned), warned
        gauge = eventually(lambda: budget_gauge(operator, pool, "Cordoned"), 30, "the gauge")
        assert gauge == 1.0 and budget_gauge(operator, pool, "Rollout") == 0.0

        cordon(kube, admin, False)  # kubectl uncordon: the pool goes on by itself
        wait_ready(kube, pool, 180, f"{pool} Ready once {admin} is uncordoned")
        assert budget_gauge(operator, pool, "Cordoned") == 0.0
    assert ledger.worst_unschedulable <= 1, ledger.worst_unschedulable
    assert ledger.worst <= 1, ledger.worst
    assert sorted(ledger.started) == sorted(others), ledger.started
    assert_released(kube, pool)


def test_an_admin_cordoned_node_needing_the_change_goes_first_and_stays_cordoned(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Issue 34 (issue 13, item 5, as users read maxUnavailable): maxUnavailable 1 and a node
    an admin cordoned before the rollout. It is out already, so changing it costs nothing:
    it goes first (though not first by name), and stays cordoned once done — so it still
    holds the one slot, the pool says so, and the other nodes wait for the admin's uncordon."""
    pool = "story-cordon"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 3))
    admin = names[1]
    cordon(kube, admin, True)
    with Ledger(kube, pool, admin_cordoned=frozenset({admin})) as ledger:
        ledger.gate_open.set()
        spec = pool_spec(pool, LAYOUT_A, maxUnavailable=1)
        kube.create(NPG, custom("NodePoolGeometry", pool, spec))
        said = f"budget held by others: {admin} cordoned by someone else (1 of 1 in use)"
        cond = eventually(lambda: held_by_others(kube, pool, said), 120, f"{admin} done first")
        assert cond["message"] == f"{said}; 1 of 3 nodes updated", cond
        assert ledger.started == [admin], ledger.started
        done = node_of(kube, admin)
        assert done["spec"].get("unschedulable") is True, done["spec"]  # the admin's cordon
        assert done["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] == "success"
        assert story.clean(kube, admin, admin=True), done
        for name in set(names) - {admin}:
            assert story.clean(kube, name), node_of(kube, name)["spec"]

        cordon(kube, admin, False)
        wait_ready(kube, pool, 180, f"{pool} Ready once {admin} is uncordoned")
    assert ledger.worst_unschedulable <= 1, ledger.worst_unschedulable
    assert ledger.worst <= 1, ledger.worst
    assert ledger.started[0] == admin and sorted(ledger.started) == sorted(names), ledger.started
    assert_released(kube, pool)
    for node in pool_nodes(kube, pool):
        assert node["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] == "success"


def test_an_impossible_layout_mid_rollout_leaves_no_taint_or_cordon(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Item 6: switch to an impossible layout while the first node drains; Stalled holds nothing."""
    pool, ns = "story-invalid", "story-invalid-ns"
    names = fleet.create_nodes(kube, story.nodes(pool, 3))
    # Keeps its node draining: a replica under a PDB of minAvailable 1 (spare: nowhere in the pool).
    (first,) = nodes_of([story.serving(kube, ns, pool)])
    # Two replicas of 3 GPUs on each other node (never beside ``serve``): so the draining node
    # is the one with the fewest pods to move, and the rest still has room for ``serve``.
    busy = (
        DeploymentWrapper("busy").pool(pool).limits({story.GPU: 3}).replicas(4).away_from("serve")
    )
    kube.create(path_of("apps/v1", "deployments", namespace=ns), busy.obj())
    placed = nodes_of(wait_running(kube, ns, "busy", 4))
    assert sorted(placed) == sorted([n for n in names if n != first] * 2), placed
    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
        eventually(lambda: story.phase(kube, first) == "Draining", 60, f"{first} draining")

        kube.patch(f"{NPG}/{pool}", {"spec": IMPOSSIBLE})
        cond = eventually(lambda: stalled(kube, pool), 60, "Stalled on the impossible layout")
        assert cond["reason"] == "InvalidGeometryForModel", cond
        eventually(lambda: all(story.clean(kube, n) for n in names), 30, "nothing held")
        assert stalled(kube, pool), "still Stalled"
    assert ledger.worst <= 1, ledger.worst
    assert ledger.evicted == {}, ledger.evicted
    assert_released(kube, pool)


def test_a_pool_in_conflict_mid_drain_is_stalled_only_once_it_holds_nothing(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Items 2 and 6: a second pool over the same label while a node drains, and a new node
    both select. The first pool starts nothing more, finishes its draining node
    (Reconciling, reason Conflict), and says Stalled only once no cordon or taint is its."""
    pool, ns, typo = "story-clash", "story-clash-ns", "story-clash-b"
    (name,) = fleet.create_nodes(kube, story.nodes(pool))
    pod = story.serving(kube, ns, pool)
    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
        eventually(lambda: story.phase(kube, name) == "Draining", 60, f"{name} draining")
        kube.create(NPG, custom("NodePoolGeometry", typo, pool_spec(pool, LAYOUT_B)))
        (new,) = fleet.create_nodes(kube, [fleet.NodeSpec(f"{pool}-1", "H100-80GB", pool=pool)])

        def finishing() -> dict[str, Any] | None:
            obj = story.observed(kube, pool)
            cond = condition(obj, "Reconciling")
            ok = cond and cond["status"] == "True" and cond["reason"] == "Conflict"
            return (
                cond if ok and "finishing the 1 node already in flight" in cond["message"] else None
            )

        cond = eventually(finishing, 60, f"{pool} Reconciling/Conflict while {name} drains")
        assert f"nodepoolgeometry/{typo}" in cond["message"] and new in cond["message"], cond
        assert not stalled(kube, pool), "Stalled while its own cordon is on a node"
        assert story.phase(kube, name) in ("Draining", "Blocked")

        pdb = path_of("policy/v1", "poddisruptionbudgets", "serve", ns)
        kube.patch(pdb, {"spec": {"minAvailable": 0}})  # the drain may finish now
        cond = eventually(lambda: stalled(kube, pool), 120, f"{pool} Stalled once {name} is done")
        assert cond["reason"] == "Conflict", cond
        assert story.clean(kube, name) and story.clean(kube, new), "a Stalled pool holds nothing"
        kube.delete(f"{NPG}/{typo}")
        wait_ready(kube, pool, 120, f"{pool} Ready once {typo} is gone")
        (again,) = wait_running(kube, ns, "serve", 1)  # placed by the scheduler where room is
    assert ledger.worst <= 1, ledger.worst
    assert list(ledger.evicted) == [pod["metadata"]["uid"]], ledger.evicted
    assert again["metadata"]["uid"] != pod["metadata"]["uid"]
    assert_released(kube, pool)


def test_reverting_a_sharing_backend_switch_mid_drain_evicts_nothing(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Item 3, SharingPolicy: MPS -> TimeSlicing, reverted while the node drains."""
    pool, ns = "story-sp-revert", "story-sp-revert-ns"
    names = sharing.nodes(kube, pool, 1, "none")  # MPS needs migStrategy none
    kube.patch(path_of("v1", "nodes", names[0]), {"metadata": {"labels": {story.SERVES: pool}}})
    sharing.create_policy(kube, pool, pool, "MPS", mps={"replicas": 2})
    mps_key = sharing.wait_ready(kube, pool)["status"]["configKey"]
    eventually(
        lambda: sharing.settled(kube, names[0]) and sharing.allocatable(kube, names[0]) == 16,
        60,
        "MPS on",
    )
    pod = story.serving(kube, ns, pool)
    assert nodes_of([pod]) == names
    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        switch = {"backend": "TimeSlicing", "mps": None, "timeSlicing": {"replicas": 4}}
        kube.patch(f"{sharing.SP}/{pool}", {"spec": switch})
        eventually(lambda: story.phase(kube, names[0]) == "Draining", 60, "TimeSlicing drain")

        revert = {"backend": "MPS", "timeSlicing": None, "mps": {"replicas": 2}}
        kube.patch(f"{sharing.SP}/{pool}", {"spec": revert})
        eventually(lambda: story.clean(kube, names[0]), 30, f"{names[0]} released at once")
        story.relax(kube, ns)
        assert sharing.wait_ready(kube, pool)["status"]["configKey"] == mps_key
        story.same_replica(kube, ns, pod)
    assert ledger.evicted == {}, ledger.evicted
    assert ledger.worst <= 1, ledger.worst
    assert sharing.label(kube, names[0]) == mps_key and sharing.allocatable(kube, names[0]) == 16
    assert sharing.settled(kube, names[0])


def test_evicted_replicas_come_back_elsewhere_and_no_drain_overdraws_a_pdb(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """Issue 14, item 4: a MIG rollout over a pool that serves two Deployments under PDBs.

    Each drain evicts replicas; kube-scheduler puts them back on the pool's other nodes
    (the Deployments select the pool) and KWOK makes them Ready; a node's next replica (or
    the next node's) goes only once its PDB allows again. The layout keeps GPUs 4-7 whole:
    7 GPUs asked of 24, of 12 at the end and of 8 while the last node drains — room, tight.
    """
    pool, ns = "story-serve", "story-serve-ns"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 3))
    namespace(kube, ns)
    budgets = {"chat": 3, "embed": 2}  # minAvailable: one replica of each may be away at once
    before = serve(kube, ns, "chat", pool=pool, replicas=4, budget=3)
    before += serve(kube, ns, "embed", pool=pool, replicas=3, budget=2)
    for app, floor in budgets.items():
        story.counted(kube, ns, app, floor + 1)
    spec = pool_spec(pool, story.HALF_MIG, maxUnavailable=1)
    with Ledger(kube, pool, ns, budgets=budgets) as ledger:
        ledger.gate_open.set()
        kube.create(NPG, custom("NodePoolGeometry", pool, spec))
        wait_ready(kube, pool, 240, f"{pool} Ready on the half-MIG layout")
        after = wait_running(kube, ns, "chat", 4) + wait_running(kube, ns, "embed", 3)
    print(f"fewest Ready replicas seen: {ledger.fewest_ready}; PDB minAvailable: {budgets}")
    assert ledger.worst == 1, ledger.worst  # one node at a time, and some node was held
    assert ledger.below_budget == [], ledger.below_budget  # no PDB ever violated
    # Each budget was used (a replica away) and never overdrawn.
    assert ledger.fewest_ready == budgets, ledger.fewest_ready
    story.assert_replaced(ledger.evicted, before, after)
    assert set(nodes_of(after)) <= set(names), nodes_of(after)
    assert_released(kube, pool)
    for node in pool_nodes(kube, pool):  # GPUs 4-7 whole, 0-3 in seven 1g.10gb each
        assert story.slices(node) == ("4", "28"), node["status"]["allocatable"]
