"""One bad record stops one node: the rest of the pool goes on.

Each row puts a record no pass can continue on gpu-1, next to gpu-2 whose
drain has just finished. gpu-2 must go on to its layout in the same pass;
gpu-1 gets no write and is named in a ``NodeFailed`` problem that says what to
fix. A hand-edited annotation is refused by ``decode`` (``StateError``); a
record that reaches the machine anyway (built in memory, not decoded) meets
``check`` and is reported the same way instead of stopping the pool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from rollout_builders import POOL, T0, desired, kinds, policy, state, written

from builders.views import NEW, node
from tessera.domain.rollout.planning import plan
from tessera.domain.rollout.state import NodeState, Phase, StateError, decode, encode
from tessera.domain.rollout.views import NodeView

THIRD = "tessera-third"
# What the review found on a node: a rollback's settled mark on a record that is not settled.
EDITED = {"phase": "Verifying", "rolledBack": True, "rbOf": THIRD}


def hand_edited(**fields: object) -> str:
    return json.dumps({**json.loads(encode(state(Phase.DRAINING))), **fields})


def observed(raw: str) -> NodeView:
    """gpu-1 as the adapter observes it (``cluster.objects.node_view``): decoded, or why not."""
    try:
        return node("gpu-1", st=decode(raw))
    except StateError as err:
        return node("gpu-1", state_error=str(err))


def impossible(phase: Phase, **kw: object) -> NodeState:
    return state(phase, rollback_of=THIRD, rolled_back=True, **kw)


@dataclass
class Row:
    bad: NodeView
    says: str


ROWS = {
    "hand-edited: rolledBack on a Verifying record": Row(
        observed(hand_edited(**EDITED)), "rollout state unreadable (rolledBack is set"
    ),
    "in memory, a candidate: no start may follow Verifying": Row(
        node("gpu-1", st=impossible(Phase.VERIFYING)),
        "gpu-1: rollout phase Verifying may not be followed by Cordoned",
    ),
    "in memory, at its layout: no clear may follow Blocked": Row(
        node("gpu-1", config=NEW, st=impossible(Phase.BLOCKED)),
        "gpu-1: rollout phase Blocked may not be followed by no record",
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_one_bad_record_stops_only_its_node(row: Row) -> None:
    draining = node("gpu-2", st=state(Phase.DRAINING), cordoned=True, tainted=True)
    want = {"gpu-1": desired(NEW), "gpu-2": desired(NEW)}
    p = plan(POOL, policy(maxUnavailable=2), want, [row.bad, draining], [], [], T0)
    assert written(p.actions, "gpu-2").phase == Phase.VERIFYING, kinds(p.actions)
    assert "SetNodeLabels:gpu-2" in kinds(p.actions)
    assert [a for a in p.actions if a.node == "gpu-1"] == []
    [problem] = p.problems
    assert (problem.node, problem.reason, problem.phase) == ("gpu-1", "NodeFailed", "Failed")
    assert row.says in problem.message and "fix or remove the annotation" in problem.message


@pytest.mark.parametrize("phase", [p for p in Phase if p != Phase.FAILED])
def test_only_a_failed_record_may_be_settled(phase: Phase) -> None:
    with pytest.raises(StateError, match=f"rolledBack is set on a {phase} record"):
        decode(hand_edited(phase=phase.value, rolledBack=True, rbOf=THIRD))
    settled = impossible(Phase.FAILED)
    assert decode(encode(settled)) == settled
