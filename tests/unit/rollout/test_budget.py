"""Issue 34: ``maxUnavailable`` counts every unavailable node of the pool, whoever made it so.

Who holds the budget and why (``budget``), then what admission does with it (``plan``):
a node still available starts only while fewer than ``maxUnavailable`` members are
unavailable; a node already unavailable goes first and takes no new slot, but starts only
while fewer than ``maxUnavailable`` nodes carry Tessera's marks; a budget others use up is
said, naming their nodes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import REGISTRY
from rollout_builders import POOL, T0, desired, kinds, policy, state, target

from builders.views import NEW, OLD, node
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.budget import Holder, classify, unavailable
from tessera.domain.rollout.outcome import RolloutOutcome
from tessera.domain.rollout.planning import Plan, plan
from tessera.domain.rollout.releasing import after, release
from tessera.domain.rollout.state import Phase, ReportPhase
from tessera.domain.rollout.views import GEOMETRY_PENDING, NodeView, Taint, pending_taint
from tessera.observability import metrics

MAINTENANCE = Taint("example.com/maintenance", "NoSchedule")  # another controller's
EVACUATE = Taint("example.com/evacuate", "NoExecute")
DEDICATED = Taint("nvidia.com/gpu", "NoSchedule", "present")  # a GPU node pool's dedication
MIRRORED = Taint("node.kubernetes.io/unschedulable", "NoSchedule")  # a cordon, as a taint
UNREACHABLE = Taint("node.kubernetes.io/unreachable", "NoExecute")
NOT_READY = Taint("node.kubernetes.io/not-ready", "NoSchedule")
OTHER_POOL = "NodePoolGeometry/other"


def tainted(n: NodeView, *taints: Taint) -> NodeView:
    return replace(n, taints=(*n.taints, *taints))


def done(name: str, **kw: Any) -> NodeView:
    """A node that already runs the target: it needs no change."""
    return node(name, config=NEW, **kw)


@pytest.mark.parametrize(
    ("n", "why", "holder", "marked"),
    [
        (done("gpu-1", cordoned=True), "cordoned by someone else", Holder.CORDONED, False),
        (node("gpu-1", cordoned=True), "cordoned by someone else", Holder.CORDONED, False),
        (done("gpu-1", ready=False), "NotReady", Holder.NOT_READY, False),
        (tainted(done("gpu-1"), UNREACHABLE), "NotReady", Holder.NOT_READY, False),
        (tainted(done("gpu-1"), NOT_READY), "NotReady", Holder.NOT_READY, False),
        (tainted(done("gpu-1"), MIRRORED), None, None, False),  # spec.unschedulable says it
        (
            tainted(done("gpu-1"), MAINTENANCE),
            "tainted example.com/maintenance:NoSchedule",
            Holder.TAINTED,
            False,
        ),
        (
            tainted(done("gpu-1"), EVACUATE),
            "tainted example.com/evacuate:NoExecute",
            Holder.TAINTED,
            False,
        ),
        (tainted(done("gpu-1"), Taint("example.com/soft", "PreferNoSchedule")), None, None, False),
        (
            node("gpu-1", st=state(Phase.DRAINING), cordoned=True, tainted=True),
            "being changed",
            Holder.ROLLOUT,
            True,
        ),
        (
            node("gpu-1", st=state(Phase.VERIFYING, owner="SharingPolicy/x"), cordoned=True),
            "being changed by SharingPolicy/x",
            Holder.OTHER_ROLLOUT,
            True,
        ),
        (node("gpu-1", st=state(Phase.FAILED, rolled_back=True)), None, None, False),
        (
            node("gpu-1", state_error="bad json", cordoned=True),
            "rollout state unreadable",
            Holder.ROLLOUT,
            True,
        ),
        (node("gpu-1", tainted=True), "tainted", Holder.ROLLOUT, True),  # its leftover
        (
            tainted(node("gpu-1"), pending_taint(OTHER_POOL)),
            "tainted by another rollout",
            Holder.OTHER_ROLLOUT,
            True,
        ),
        (
            node("gpu-1", ready=False, cordoned=True, tainted=True),  # the first reason wins
            "NotReady",
            Holder.NOT_READY,
            True,
        ),
        (done("gpu-1"), None, None, False),
        (node("gpu-1"), None, None, False),
    ],
    ids=[
        "admin-cordon-node-at-target",
        "admin-cordon-node-to-change",
        "not-ready",
        "unreachable-taint-ready-again",
        "not-ready-taint",
        "cordon-mirror-taint-alone",
        "another-controllers-noschedule",
        "another-controllers-noexecute",
        "prefer-no-schedule",
        "own-rollout",
        "another-objects-rollout",
        "settled-rollback",
        "unreadable-record",
        "own-leftover-taint",
        "another-pools-taint",
        "not-ready-and-cordoned",
        "available-at-target",
        "available-to-change",
    ],
)
def test_who_holds_the_budget(
    n: NodeView, why: str | None, holder: Holder | None, marked: bool
) -> None:
    found = classify(POOL, n, member=True)
    if why is None:
        assert found is None
        return
    assert found is not None
    assert (found.why, found.holder, found.marked) == (why, holder, marked)
    assert found.by_others == (holder is not Holder.ROLLOUT)


def test_a_taint_every_member_carries_is_the_pools_dedication_not_an_outage() -> None:
    nodes = [
        tainted(done("gpu-0"), DEDICATED),
        tainted(done("gpu-1"), DEDICATED, MAINTENANCE),
        tainted(node("gpu-2"), DEDICATED),
    ]
    found = unavailable(POOL, nodes, {"gpu-0", "gpu-1", "gpu-2"})
    assert {n: u.why for n, u in found.items()} == {
        "gpu-1": "tainted example.com/maintenance:NoSchedule"
    }
    # a member without it: the taint is no dedication, every node carrying it is out
    alone = [*nodes, node("gpu-3")]
    found = unavailable(POOL, alone, {"gpu-0", "gpu-1", "gpu-2", "gpu-3"})
    assert sorted(found) == ["gpu-0", "gpu-1", "gpu-2"]


def test_a_node_outside_the_pool_counts_only_while_a_rollout_holds_it() -> None:
    left = node("gpu-9", st=state(Phase.DRAINING), cordoned=True, tainted=True)
    nodes = [left, node("gpu-8", cordoned=True), node("gpu-1")]
    assert sorted(unavailable(POOL, nodes, {"gpu-1"})) == ["gpu-9"]


def _started(p: Plan) -> list[str]:
    return sorted(
        a.node
        for a in p.actions
        if isinstance(a, act.SetNodeState) and a.state.phase == Phase.CORDONED
    )


def _with(*nodes: NodeView) -> list[NodeView]:
    return list(nodes)


@pytest.mark.parametrize(
    ("nodes", "limit", "started", "reason"),
    [
        (_with(done("gpu-0", cordoned=True), node("gpu-1"), node("gpu-2")), 1, [], "held"),
        (_with(done("gpu-0", cordoned=True), node("gpu-1"), node("gpu-2")), 2, ["gpu-1"], ""),
        (_with(tainted(done("gpu-0"), MAINTENANCE), node("gpu-1")), 1, [], "held"),
        (_with(tainted(done("gpu-0"), EVACUATE), node("gpu-1")), 1, [], "held"),
        (_with(done("gpu-0", ready=False), node("gpu-1")), 1, [], "held"),
        (_with(tainted(done("gpu-0"), UNREACHABLE), node("gpu-1")), 1, [], "held"),
        (_with(tainted(node("gpu-0"), NOT_READY), node("gpu-1")), 1, [], "held"),
        (_with(tainted(done("gpu-0"), MIRRORED), node("gpu-1")), 1, ["gpu-1"], ""),
        (
            _with(*(tainted(node(f"gpu-{i}"), DEDICATED) for i in range(3))),
            1,
            ["gpu-0"],
            "",
        ),
        (
            _with(node("gpu-0"), tainted(node("gpu-1"), MAINTENANCE), node("gpu-2")),
            1,
            ["gpu-1"],
            "",
        ),
        (
            _with(done("gpu-0", cordoned=True), node("gpu-1", cordoned=True), node("gpu-2")),
            1,
            ["gpu-1"],
            "",
        ),
        (
            _with(
                node("gpu-0", st=state(Phase.DRAINING, owner="SharingPolicy/x"), cordoned=True),
                node("gpu-1"),
            ),
            1,
            [],
            "held",
        ),
        (
            _with(
                node("gpu-0", st=state(Phase.DRAINING), cordoned=True, tainted=True), node("gpu-1")
            ),
            1,
            [],
            "",
        ),
    ],
    ids=[
        "admin-cordon-on-a-node-needing-no-change-budget-1",
        "admin-cordon-on-a-node-needing-no-change-budget-2",
        "another-controllers-taint",
        "another-controllers-noexecute-taint",
        "a-not-ready-node-needing-no-change",
        "unreachable-taint-on-a-node-ready-again",
        "a-node-whose-not-ready-taint-outlives-it-is-never-started",
        "the-cordons-mirror-taint-alone",
        "a-taint-every-node-carries",
        "a-tainted-node-needing-the-change-goes-first",
        "an-unavailable-node-starts-though-others-use-the-budget",
        "another-objects-rollout",
        "its-own-rollout-holds-the-slot",
    ],
)
def test_admission_counts_the_whole_pool(
    nodes: list[NodeView], limit: int, started: list[str], reason: str
) -> None:
    want = {n.name: desired() for n in nodes}
    p = plan(POOL, policy(maxUnavailable=limit), want, nodes, [], [], T0)
    assert _started(p) == started, kinds(p.actions)
    held = p.verdict.reason == "BudgetHeldByOthers"
    assert held == (reason == "held"), p.verdict
    if held:
        named = [u for u in p.unavailable if u.by_others]
        assert named and all(f"{u.node} {u.why}" in p.verdict.message for u in named)
        assert p.verdict.message.startswith("budget held by others: ")
    waiting = [r for r in p.nodes if r.phase == ReportPhase.PENDING and r.name not in started]
    for r in waiting:  # every node left out says why
        assert r.message, r


def test_a_node_another_controller_tainted_goes_first_and_is_cordoned_and_uncordoned() -> None:
    nodes = [node("gpu-0"), tainted(node("gpu-1"), MAINTENANCE), node("gpu-2")]
    p = plan(POOL, policy(maxUnavailable=1), {n.name: desired() for n in nodes}, nodes, [], [], T0)
    assert kinds(p.actions) == ["SetNodeState:Cordoned", "AddTaint:gpu-1", "Cordon:gpu-1"]
    assert (
        "already unavailable (tainted example.com/maintenance:NoSchedule), takes no new slot"
        in (p.actions[0].reason)
    )
    record = p.actions[0]
    assert isinstance(record, act.SetNodeState) and record.state.orig is False  # Tessera's cordon
    waiting = {r.name: r.message for r in p.nodes if r.phase == ReportPhase.PENDING}
    assert waiting == dict.fromkeys(
        ("gpu-0", "gpu-2"), "waiting for a disruption slot: 1 of 1 in use: gpu-1 being changed"
    )


def test_already_unavailable_nodes_go_one_budget_at_a_time_and_add_nothing() -> None:
    """Two admin cordons needing the change and one at its target, budget 1: the pool is 3
    nodes out already; one starts (Tessera's marks on one node), and none still available."""
    nodes = [
        done("gpu-0", cordoned=True),
        node("gpu-1", cordoned=True),
        node("gpu-2", cordoned=True),
        node("gpu-3"),
    ]
    p = plan(POOL, policy(maxUnavailable=1), {n.name: desired() for n in nodes}, nodes, [], [], T0)
    assert _started(p) == ["gpu-1"]
    assert not any(isinstance(a, act.Cordon) for a in p.actions)  # it was cordoned already
    assert "and stays cordoned afterwards" in p.actions[0].reason
    waiting = {r.name: r.message for r in p.nodes if r.phase == ReportPhase.PENDING}
    assert waiting["gpu-2"] == (
        "already unavailable (cordoned by someone else); waiting for a disruption slot: "
        "1 of 1 in use: gpu-1 being changed"
    )
    assert waiting["gpu-3"].startswith("waiting for a disruption slot: 3 of 1 in use: gpu-0 ")
    assert p.verdict.reason == "RollingOut"  # its own rollout holds a slot: not others' alone


def test_a_budget_held_by_others_names_at_most_five_nodes() -> None:
    nodes = [done(f"gpu-{i}", cordoned=True) for i in range(7)] + [node("gpu-7")]
    p = plan(POOL, policy(maxUnavailable=2), {n.name: desired() for n in nodes}, nodes, [], [], T0)
    assert p.actions == ()
    assert p.verdict.reason == "BudgetHeldByOthers"
    assert p.verdict.message == (
        "budget held by others: gpu-0 cordoned by someone else, gpu-1 cordoned by someone "
        "else, gpu-2 cordoned by someone else, gpu-3 cordoned by someone else, gpu-4 cordoned "
        "by someone else and 2 more (7 of 2 in use); 7 of 8 nodes updated"
    )


def test_a_closed_gate_is_said_before_a_budget_held_by_others() -> None:
    nodes = [done("gpu-0", cordoned=True), node("gpu-1")]
    want = {n.name: desired() for n in nodes}
    p = plan(POOL, policy(maxUnavailable=1, paused=True), want, nodes, [], [], T0)
    assert p.actions == () and p.verdict.reason == "RollingOut"
    assert p.verdict.message.startswith("paused")


def test_a_sharing_policys_bystanders_hold_the_budget_and_count_in_its_percentage() -> None:
    """Nodes of the policy that need no rollout are passed beside the plan's own."""
    rolling = [node("gpu-0"), node("gpu-1")]
    want = {n.name: desired() for n in rolling}
    cordoned = [done("gpu-2", cordoned=True)]
    p = plan(POOL, policy(maxUnavailable=1), want, rolling, [], [], T0, bystanders=cordoned)
    assert p.actions == () and p.verdict.reason == "BudgetHeldByOthers"
    assert "gpu-2 cordoned by someone else" in p.verdict.message
    assert all(r.name != "gpu-2" for r in p.nodes)  # it is no node of this rollout
    bystanders = [*cordoned, done("gpu-3"), done("gpu-4"), done("gpu-5")]  # 6 members: 50% is 3
    p = plan(POOL, policy(maxUnavailable="50%"), want, rolling, [], [], T0, bystanders=bystanders)
    assert _started(p) == ["gpu-0", "gpu-1"]
    assert "2 of 3 disruption slots free" in p.actions[0].reason


def test_a_release_lets_go_of_tessera_s_marks_and_keeps_someone_elses_cordon() -> None:
    ours = tainted(
        node("gpu-1", config=NEW, st=state(Phase.VERIFYING), cordoned=True, tainted=True),
        MIRRORED,
        MAINTENANCE,
    )
    o: RolloutOutcome = release(ours, state(Phase.VERIFYING), T0, "verified", settle=True)
    freed = after(ours, o)
    assert o.releases and not freed.unschedulable and freed.state is None
    assert freed.taints == (MAINTENANCE,)  # the cordon's mirror goes with the cordon
    admins = replace(ours, state=state(Phase.VERIFYING, orig=True))
    kept = after(admins, release(admins, state(Phase.VERIFYING, orig=True), T0, "verified"))
    assert kept.unschedulable and kept.taints == (MIRRORED, MAINTENANCE)
    rolled = state(Phase.VERIFYING, rollback_of=NEW, target=target(OLD))
    settled = after(ours, release(ours, rolled, T0, "verified", settle=True))
    assert settled.state is not None and settled.state.rolled_back  # not in flight: no slot


def test_the_released_view_frees_a_slot_only_when_it_ends_available() -> None:
    nodes = [
        node("gpu-0", config=NEW, st=state(Phase.VERIFYING), cordoned=True, tainted=True),
        node("gpu-1"),
    ]
    want = {n.name: desired() for n in nodes}
    p = plan(POOL, policy(maxUnavailable=1), want, nodes, [], [], T0)
    assert _started(p) == ["gpu-1"] and len(p.stages) == 2
    admins = [replace(nodes[0], taints=(GEOMETRY_PENDING, MAINTENANCE)), nodes[1]]
    p = plan(POOL, policy(maxUnavailable=1), want, admins, [], [], T0)
    assert _started(p) == [] and p.verdict.reason == "BudgetHeldByOthers"
    assert [(u.node, u.why) for u in p.unavailable] == [
        ("gpu-0", "tainted example.com/maintenance:NoSchedule")
    ]


def test_the_budget_gauge_counts_nodes_by_reason_and_never_names_one() -> None:
    nodes = [done("gpu-0", cordoned=True), done("gpu-1", ready=False), node("gpu-2")]
    p = plan(POOL, policy(maxUnavailable=3), {n.name: desired() for n in nodes}, nodes, [], [], T0)
    metrics.export_rollout("NodePoolGeometry", "budget-gauge", p)

    def shown() -> dict[str, float | None]:
        return {
            reason.value: REGISTRY.get_sample_value(
                "tessera_rollout_budget_nodes",
                {"kind": "NodePoolGeometry", "pool": "budget-gauge", "reason": reason.value},
            )
            for reason in Holder
        }

    assert shown() == {  # gpu-2 started this pass: its own rollout's
        "Rollout": 1.0,
        "OtherRollout": 0.0,
        "NotReady": 1.0,
        "Cordoned": 1.0,
        "Tainted": 0.0,
    }
    labels = {
        tuple(sorted(s.labels))
        for m in REGISTRY.collect()
        if m.name == "tessera_rollout_budget_nodes"
        for s in m.samples
    }
    assert labels == {("kind", "pool", "reason")}
    metrics.forget_rollout("NodePoolGeometry", "budget-gauge")
    assert set(shown().values()) == {None}
