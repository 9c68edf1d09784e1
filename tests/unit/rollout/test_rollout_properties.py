"""Invariants over random observations (hypothesis), and crash-at-any-prefix convergence.

Whatever the cluster looks like, a plan must never: uncordon a node whose
original state was unschedulable, evict a DaemonSet, mirror or terminating
pod, cordon a node whose layout is invalid, or start more nodes than the
budget allows. And it must be a pure function: same inputs, same plan.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from persisted import ONE_WRITE, applied, not_one_write, planned
from rollout_builders import POOL, T0, desired, kinds, policy, secs, state
from rollout_world import World

from builders.views import NEW, OLD, gpu_pod, node, pdb
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.gates import budget
from tessera.domain.rollout.planning import in_flight, plan
from tessera.domain.rollout.state import Phase, ReportPhase
from tessera.domain.rollout.views import GEOMETRY_PENDING, DesiredNode, NodeView, PodView, Taint

PHASES = [None, *Phase]
MAINTENANCE = Taint("example.com/maintenance", "NoSchedule")  # another controller's


@hs.composite
def clusters(draw: hs.DrawFn) -> tuple[list[NodeView], list[PodView], dict[str, object]]:
    count = draw(hs.integers(1, 8))
    nodes, pods = [], []
    for i in range(count):
        name = f"gpu-{i}"
        phase = draw(hs.one_of(hs.none(), hs.sampled_from(PHASES)))  # idle nodes, often
        st = None
        if phase is not None:
            st = state(
                phase,
                orig=draw(hs.booleans()),
                since=T0 - secs(draw(hs.integers(0, 3600))),
                rolled_back=phase == Phase.FAILED and draw(hs.booleans()),
            )
        nodes.append(
            node(
                name,
                config=draw(hs.sampled_from([OLD, NEW, None])),
                agent=draw(hs.sampled_from(["success", "pending", "failed", None])),
                st=st,
                cordoned=draw(hs.booleans()),
                ready=draw(hs.booleans()),
                tainted=draw(hs.booleans()),
            )
        )
        if draw(hs.booleans()):
            nodes[-1] = replace(nodes[-1], taints=(*nodes[-1].taints, MAINTENANCE))
        for j in range(draw(hs.integers(0, 3))):
            pods.append(
                gpu_pod(
                    f"p{i}-{j}",
                    name,
                    owner_kind=draw(hs.sampled_from(["ReplicaSet", "DaemonSet", None])),
                    is_mirror=draw(hs.booleans()),
                    deletion_timestamp=draw(hs.sampled_from([None, T0])),
                    labels={"app": "s"},
                )
            )
    rollout = {
        "paused": draw(hs.booleans()),
        "approval": draw(hs.sampled_from(["Automatic", "Manual"])),
        "maxUnavailable": draw(hs.sampled_from([1, 2, "50%"])),
        "onFailure": draw(hs.sampled_from(["Hold", "Rollback"])),
        "drain": {"force": draw(hs.booleans())},
    }
    return nodes, pods, rollout


@settings(max_examples=300, deadline=None)
@given(clusters(), hs.integers(0, 7))
def test_plan_invariants(
    cluster: tuple[list[NodeView], list[PodView], dict[str, object]], bad: int
) -> None:
    nodes, pods, rollout = cluster
    spec = policy(**rollout)
    want = {n.name: desired(invalid="no" if i == bad else "") for i, n in enumerate(nodes)}
    pdbs = [pdb("s", 1, app="s")]
    p = plan(POOL, spec, want, nodes, pods, pdbs, T0)
    assert not not_one_write(planned(nodes, p.actions))  # every write: one pass of the table
    assert p == plan(POOL, spec, want, nodes, pods, pdbs, T0)  # pure and deterministic
    by_name = {n.name: n for n in nodes}
    by_key = {(q.namespace, q.name): q for q in pods}
    limit = budget(spec.max_unavailable, len(nodes))
    before = _unavailable_after(nodes, [])
    taken = set(before)
    gated = spec.paused or spec.approval == "Manual"
    started: set[str] = set()
    for number, stage in enumerate(p.stages):
        admitted: set[str] = set()
        for a in stage:
            n = by_name[a.node]
            holds = n.state is not None and in_flight(n.state)
            if isinstance(a, act.AddTaint | act.Cordon):  # only a node the rollout holds
                assert holds or a.node in admitted | started, kinds(stage)
                assert holds or not gated, kinds(stage)
            if isinstance(a, act.Uncordon):
                assert n.state is not None and not n.state.orig
            if isinstance(a, act.Evict | act.DeletePod):
                q = by_key[(a.namespace, a.name)]
                assert not (q.is_daemonset or q.is_mirror or q.deletion_timestamp)
            if isinstance(a, act.Cordon) and want[a.node].invalid:
                # only a rollout already under way
                assert n.state is not None and in_flight(n.state)
            if (
                isinstance(a, act.SetNodeState)
                and a.state.phase == Phase.CORDONED
                and (n.state is None or not in_flight(n.state))
            ):
                assert not want[a.node].invalid
                started.add(a.node)
                admitted |= set() if a.node in taken else {a.node}
        # a node still available starts only into a free slot of the whole pool's budget
        assert len(admitted) <= max(0, limit - len(taken))
        after = _unavailable_after(nodes, p.stages[: number + 1])
        if admitted:  # Tessera never takes the pool beyond maxUnavailable
            assert len(after) <= limit, (sorted(after), limit)
        # an already unavailable node adds nothing, but Tessera's marks count on it too
        assert len(after) <= max(limit, len(before)), (sorted(before), sorted(after))
        if started:
            assert len(_held_after(nodes, p.stages)) <= limit
        taken = after  # the next stage admits against what this one leaves
    assert len(p.problems) <= 20


def _unavailable_after(
    nodes: Sequence[NodeView], stages: Sequence[Sequence[act.Action]]
) -> set[str]:
    """The nodes an outside observer sees unavailable once ``stages`` have landed: cordoned,
    NotReady, tainted (Tessera's taint, another controller's unless every node carries it),
    held mid-change or with a record nobody can read — whoever made them so."""
    view = {n.name: n for n in nodes}
    for a in (a for stage in stages for a in stage):
        n = view[a.node]
        if isinstance(a, act.Cordon | act.Uncordon):
            view[a.node] = replace(n, unschedulable=isinstance(a, act.Cordon))
        elif isinstance(a, act.AddTaint):
            view[a.node] = replace(n, taints=(*n.taints, a.taint))
        elif isinstance(a, act.RemoveTaint):
            view[a.node] = replace(n, taints=tuple(t for t in n.taints if t.key != a.taint.key))
        elif isinstance(a, act.SetNodeState):
            view[a.node] = replace(n, state=a.state, state_error="")
        elif isinstance(a, act.ClearNodeState):
            view[a.node] = replace(n, state=None, state_error="")
    dedicated = all(MAINTENANCE in n.taints for n in view.values())
    return {
        n.name
        for n in view.values()
        if n.unschedulable
        or not n.ready
        or n.state_error
        or n.has_taint(GEOMETRY_PENDING)
        or (MAINTENANCE in n.taints and not dedicated)
        or (n.state is not None and in_flight(n.state))
    }


def _held_after(nodes: Sequence[NodeView], stages: Sequence[Sequence[act.Action]]) -> set[str]:
    """Nodes carrying Tessera's marks (its taint, a rollout in flight) once ``stages`` land:
    what an outside observer counts as held by Tessera."""
    tainted = {n.name for n in nodes if n.has_taint(GEOMETRY_PENDING)}
    flying = {n.name for n in nodes if n.state_error or (n.state and in_flight(n.state))}
    for a in (a for stage in stages for a in stage):
        if isinstance(a, act.AddTaint):
            tainted.add(a.node)
        elif isinstance(a, act.RemoveTaint):
            tainted.discard(a.node)
        elif isinstance(a, act.SetNodeState):
            flying |= {a.node} if in_flight(a.state) else set()
        elif isinstance(a, act.ClearNodeState):
            flying.discard(a.node)
    return tainted | flying


@settings(max_examples=60, deadline=None)
@given(hs.integers(0, 10_000))
def test_crash_after_any_prefix_converges(seed: int) -> None:
    """Kill the operator after a random number of writes, every pass: it still converges."""
    rng = random.Random(seed)
    world = World(rng, T0)
    for i in range(6):
        world.add_node(f"gpu-{i}", OLD, cordoned=i == 0)
        for _ in range(rng.randint(0, 2)):
            world.add_pod(f"gpu-{i}", "train")
    want = {name: desired(NEW) for name in world.nodes}
    spec = policy(maxUnavailable=2)
    for _ in range(400):
        world.tick(secs(10))
        nodes, pods, pdbs = world.observe()
        p = plan(POOL, spec, want, nodes, pods, pdbs, world.now)
        if not p.actions and p.verdict.state == "ready":
            break
        for a in p.actions[: rng.randint(0, len(p.actions))]:
            change = applied(world, a)  # what the node carries after the write
            assert change is None or change in ONE_WRITE, not_one_write([change])
            assert len(world.disrupted()) <= 2 and len(world.held()) <= 2
    else:
        raise AssertionError("did not converge")
    assert [n.name for n in world.nodes.values() if n.unschedulable] == ["gpu-0"]
    assert all(not n.taints and not n.annotations for n in world.nodes.values())


def test_converged_pool_plans_nothing_on_resync() -> None:
    nodes = [node(f"gpu-{i}", config=NEW) for i in range(5)]
    p = plan(POOL, policy(), {n.name: desired() for n in nodes}, nodes, [], [], T0)
    assert p.actions == () and p.requeue_after is None and p.verdict.state == "ready"


def test_plan_hash_is_stable_while_nodes_roll() -> None:
    want = {f"gpu-{i}": desired() for i in range(3)}
    before = plan(POOL, policy(), want, [node(f"gpu-{i}") for i in range(3)], [], [], T0)
    during = plan(
        POOL,
        policy(),
        want,
        [
            node("gpu-0", config=NEW),
            node("gpu-1", st=state(Phase.DRAINING), cordoned=True),
            node("gpu-2"),
        ],
        [],
        [],
        T0 + secs(600),
    )
    assert before.hash == during.hash
    other = plan(POOL, policy(), {k: desired("x") for k in want}, [], [], [], T0)
    assert other.hash != before.hash


def test_manual_approval_with_the_plan_hash_starts_nodes() -> None:
    want = {"gpu-1": desired()}
    spec = policy(approval="Manual")
    waiting = plan(POOL, spec, want, [node()], [], [], T0)
    assert waiting.actions == () and waiting.verdict.reason == "WaitingForApproval"
    assert waiting.hash in waiting.verdict.message
    go = plan(POOL, spec, want, [node()], [], [], T0, approved_hash=waiting.hash)
    assert any(isinstance(a, act.Cordon) for a in go.actions)


def test_paused_lets_in_flight_nodes_finish() -> None:
    nodes = [node("gpu-1", st=state(Phase.APPLYING), cordoned=True, tainted=True), node("gpu-2")]
    p = plan(
        POOL,
        policy(paused=True, maxUnavailable=2),
        {n.name: desired() for n in nodes},
        nodes,
        [],
        [],
        T0,
    )
    assert {a.node for a in p.actions} == {"gpu-1"}


def _budget_pool() -> list[NodeView]:
    return [
        node("gpu-0", config=NEW, cordoned=True),  # cordoned by an admin, Tessera is done with it
        node("gpu-1", config=NEW, ready=False),
        node("gpu-2", cordoned=True),  # cordoned by an admin; its layout is impossible here
        node("gpu-3"),
        node("gpu-4"),
    ]


def _budget_want(nodes: list[NodeView]) -> dict[str, DesiredNode]:
    return {n.name: desired(invalid="no" if n.name == "gpu-2" else "") for n in nodes}


def test_budget_counts_every_unavailable_node_also_once_tessera_is_done_with_it() -> None:
    """Issue 34: an admin's cordon counts whoever set it, on a node Tessera is done with too."""
    nodes = _budget_pool()
    p = plan(POOL, policy(maxUnavailable=4), _budget_want(nodes), nodes, [], [], T0)
    assert sorted({a.node for a in p.actions if isinstance(a, act.Cordon)}) == ["gpu-3"]
    assert "1 of 4 disruption slots free" in next(a.reason for a in p.actions)
    assert [(u.node, u.why) for u in p.unavailable] == [
        ("gpu-0", "cordoned by someone else"),
        ("gpu-1", "NotReady"),
        ("gpu-2", "cordoned by someone else"),
        ("gpu-3", "being changed"),
    ]


def test_a_budget_exhausted_by_others_says_whose_nodes_hold_it() -> None:
    nodes = _budget_pool()
    p = plan(POOL, policy(maxUnavailable=3), _budget_want(nodes), nodes, [], [], T0)
    assert p.actions == ()
    waiting = {r.name: r.message for r in p.nodes if r.name in ("gpu-3", "gpu-4")}
    text = (
        "waiting for a disruption slot: 3 of 3 in use: gpu-0 cordoned by someone else, "
        "gpu-1 NotReady, gpu-2 cordoned by someone else"
    )
    assert waiting == {"gpu-3": text, "gpu-4": text}
    # Without the impossible layout's Stalled, the pool is Reconciling and says who holds it.
    alone = [node("gpu-1", config=NEW, ready=False), node("gpu-3")]
    p = plan(POOL, policy(maxUnavailable=1), {n.name: desired() for n in alone}, alone, [], [], T0)
    assert p.verdict.state == "progressing" and p.verdict.reason == "BudgetHeldByOthers"
    assert p.verdict.message == (
        "budget held by others: gpu-1 NotReady (1 of 1 in use); 1 of 2 nodes updated"
    )
    assert p.requeue_after is not None  # looked at again, besides the Node change that frees it


def test_problems_are_bounded() -> None:
    nodes = [node(f"gpu-{i:02d}") for i in range(40)]
    want = {n.name: desired(invalid="too many slices") for n in nodes}
    p = plan(POOL, policy(), want, nodes, [], [], T0)
    assert len(p.problems) == 20 and p.counts.total == 40 and p.actions == ()


def _finishing(name: str, **kw: Any) -> NodeView:
    """A node whose new layout is live: this pass releases it."""
    return node(name, config=NEW, st=state(Phase.VERIFYING, **kw), cordoned=True, tainted=True)


def test_a_release_hands_its_slot_to_the_next_node_in_the_same_pass() -> None:
    nodes = [_finishing("gpu-1"), node("gpu-2"), node("gpu-3")]
    p = plan(POOL, policy(maxUnavailable=1), {n.name: desired() for n in nodes}, nodes, [], [], T0)
    release, admit = p.stages
    assert kinds(release) == [
        "SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "Uncordon:gpu-1", "ClearNodeState:gpu-1"
    ]  # fmt: skip
    assert kinds(admit) == ["SetNodeState:Cordoned", "AddTaint:gpu-2", "Cordon:gpu-2"]
    assert "1 of 1 disruption slots free" in admit[0].reason


def test_an_admin_cordoned_node_tessera_is_done_with_still_holds_its_slot() -> None:
    """Issue 34: it stays cordoned, so it still counts; the pool says who holds the budget."""
    nodes = [_finishing("gpu-1", orig=True), node("gpu-2")]
    p = plan(POOL, policy(maxUnavailable=1), {n.name: desired() for n in nodes}, nodes, [], [], T0)
    (release,) = p.stages
    assert kinds(release) == [
        "SetNodeState:Uncordoning",
        "RemoveTaint:gpu-1",
        "ClearNodeState:gpu-1",
    ]
    waiting = next(r for r in p.nodes if r.name == "gpu-2")
    assert waiting.message == (
        "waiting for a disruption slot: 1 of 1 in use: gpu-1 cordoned by someone else"
    )
    assert p.verdict.reason == "BudgetHeldByOthers", p.verdict
    assert p.verdict.message.startswith("budget held by others: gpu-1 cordoned by someone else")
    # once the admin uncordons it, the next node goes
    back = [node("gpu-1", config=NEW), node("gpu-2")]
    p = plan(POOL, policy(maxUnavailable=1), {n.name: desired() for n in back}, back, [], [], T0)
    assert kinds(p.actions) == ["SetNodeState:Cordoned", "AddTaint:gpu-2", "Cordon:gpu-2"]


@pytest.mark.parametrize(
    "leaving",
    [
        replace(_finishing("gpu-1"), ready=False),  # NotReady counts against the budget
        replace(  # backed out, not at its target: the admin's cordon still counts
            node("gpu-1", st=state(Phase.DRAINING, orig=True), cordoned=True, tainted=True),
        ),
    ],
    ids=["not-ready", "admin-cordoned-backed-out"],
)
def test_a_release_that_leaves_the_node_unavailable_frees_no_slot(leaving: NodeView) -> None:
    nodes = [leaving, node("gpu-2")]
    want = {n.name: desired() for n in nodes}
    if leaving.unschedulable and leaving.ready:
        want["gpu-1"] = desired(invalid="no")
    p = plan(POOL, policy(maxUnavailable=1), want, nodes, [], [], T0)
    assert len(p.stages) == 1 and {a.node for a in p.actions} == {"gpu-1"}
    waiting = next(r for r in p.nodes if r.name == "gpu-2")
    assert waiting.message.startswith("waiting for a disruption slot: 1 of 1 in use: gpu-1")


def _admin(name: str, **kw: Any) -> NodeView:
    """A node someone else cordoned before the rollout, still on the old layout."""
    return node(name, cordoned=True, **kw)


@pytest.mark.parametrize(
    ("nodes", "limit", "started"),
    [
        ([_admin("gpu-0"), _admin("gpu-1"), _admin("gpu-2")], 1, ["gpu-0"]),
        ([_admin("gpu-0"), _admin("gpu-1"), _admin("gpu-2")], 2, ["gpu-0", "gpu-1"]),
        ([_admin("gpu-0"), node("gpu-1"), node("gpu-2")], 2, ["gpu-0", "gpu-1"]),
        ([_admin("gpu-0"), node("gpu-1"), node("gpu-2")], 1, ["gpu-0"]),
        (
            [
                _admin("gpu-0", st=state(Phase.DRAINING, orig=True), tainted=True),
                _admin("gpu-1"),
            ],
            1,
            [],
        ),
    ],
    ids=[
        "three-cordoned-budget-1",
        "three-cordoned-budget-2",
        "cordoned-and-free-budget-2",
        "cordoned-and-free-budget-1",
        "one-cordoned-in-flight-budget-1",
    ],
)
def test_nodes_cordoned_by_others_start_one_budget_at_a_time(
    nodes: list[NodeView], limit: int, started: list[str]
) -> None:
    """Each started node carries Tessera's taint and state: never more than maxUnavailable."""
    want = {n.name: desired() for n in nodes}
    p = plan(POOL, policy(maxUnavailable=limit), want, nodes, [], [], T0)
    admitted = [a.node for a in p.actions if isinstance(a, act.SetNodeState)]
    assert sorted(set(admitted) - {n.name for n in nodes if n.state}) == started
    assert len(_held_after(nodes, p.stages)) <= limit
    waiting = [r for r in p.nodes if r.phase == ReportPhase.PENDING]
    assert len(waiting) == len(nodes) - len(started) - sum(1 for n in nodes if n.state)
    for r in waiting:
        assert r.message.startswith(("already unavailable (", "waiting for")), r
