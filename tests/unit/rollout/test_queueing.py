"""No pod moved twice: members waiting for their turn carry a PreferNoSchedule taint while their
pool rolls out, and nothing of it outlives the rollout."""

from __future__ import annotations

from dataclasses import replace

from rollout_builders import POOL, T0, desired, kinds, policy, state

from builders.views import NEW, node
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.backout import backout
from tessera.domain.rollout.planning import plan
from tessera.domain.rollout.state import Phase
from tessera.domain.rollout.views import NodeView, queued_taint

QUEUED = queued_taint(POOL)


def queued(n: NodeView) -> NodeView:
    return replace(n, taints=(*n.taints, QUEUED))


def marks(actions: tuple[act.Action, ...]) -> list[str]:
    return [
        f"{type(a).__name__}:{a.node}"
        for a in actions
        if isinstance(a, act.AddTaint | act.RemoveTaint) and a.taint == QUEUED
    ]


def run(nodes: list[NodeView], *, queue: bool = True, **rollout: object) -> tuple[act.Action, ...]:
    want = {n.name: desired() for n in nodes}
    return plan(POOL, policy(**rollout), want, nodes, [], [], T0, queue=queue).actions


def test_the_nodes_that_wait_are_queued_as_the_first_one_starts() -> None:
    actions = run([node("gpu-1"), node("gpu-2"), node("gpu-3")])
    assert marks(actions) == ["AddTaint:gpu-2", "AddTaint:gpu-3"]
    added = next(a for a in actions if isinstance(a, act.AddTaint) and a.taint == QUEUED)
    assert (added.taint.effect, added.taint.value) == ("PreferNoSchedule", "NodePoolGeometry.h100")


def test_a_queued_node_loses_the_mark_when_it_starts() -> None:
    done = node("gpu-1", config=NEW)
    actions = run([done, queued(node("gpu-2"))])
    assert "SetNodeState:Cordoned" in kinds(actions) and marks(actions) == ["RemoveTaint:gpu-2"]


def test_nothing_is_queued_before_the_gates_open() -> None:
    for gate in ({"paused": True}, {"approval": "Manual"}):
        assert marks(run([node("gpu-1"), node("gpu-2")], **gate)) == []


def test_a_pause_lifts_the_marks_while_the_nodes_in_flight_finish() -> None:
    flying = node("gpu-1", st=state(Phase.DRAINING), cordoned=True, tainted=True)
    assert marks(run([flying, queued(node("gpu-2"))], paused=True)) == ["RemoveTaint:gpu-2"]


def test_a_node_at_its_target_or_out_of_the_pool_loses_the_mark() -> None:
    flying = node("gpu-1", st=state(Phase.DRAINING), cordoned=True, tainted=True)
    done, gone = queued(node("gpu-2", config=NEW)), queued(node("gpu-3"))
    want = {"gpu-1": desired(), "gpu-2": desired()}
    p = plan(POOL, policy(), want, [flying, done, gone], [], [], T0, queue=True)
    assert marks(p.actions) == ["RemoveTaint:gpu-2", "RemoveTaint:gpu-3"]


def test_the_last_node_done_takes_the_marks_with_it() -> None:
    assert marks(run([queued(node("gpu-1", config=NEW))])) == ["RemoveTaint:gpu-1"]


def test_a_sharing_switch_queues_nothing() -> None:
    assert marks(run([node("gpu-1"), node("gpu-2")], queue=False)) == []


def test_deleting_the_pool_lifts_every_mark() -> None:
    out = backout(POOL, policy(), [queued(node("gpu-1")), queued(node("gpu-2", config=NEW))], T0)
    assert marks(out.actions) == ["RemoveTaint:gpu-1", "RemoveTaint:gpu-2"] and not out.done


def test_another_pools_mark_is_left_alone() -> None:
    theirs = replace(node("gpu-2"), taints=(queued_taint("NodePoolGeometry/other"),))
    flying = node("gpu-1", st=state(Phase.DRAINING), cordoned=True, tainted=True)
    want = {"gpu-1": desired()}
    assert marks(plan(POOL, policy(), want, [flying, theirs], [], [], T0, queue=True).actions) == []
