"""Tessera's taint: only on nodes its budgeted rollout holds; leftovers are lifted by their pool.

Earlier versions tainted every node without a layout at once, before approval
and outside the budget (issue 13, item 4); such taints carry their pool's name,
so a leftover is lifted by that pool only (two pools once fought over ownerless
ones, write for write).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from rollout_builders import POOL, T0, desired, policy, state

from builders.views import NEW, node
from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain import rollout
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.views import GEOMETRY_PENDING, pending_taint

OTHER = "NodePoolGeometry/a100"


def _fresh(taint: rollout.Taint | None = None) -> rollout.NodeView:
    return replace(node(config=None, agent=None), taints=(taint,) if taint else ())


@pytest.mark.parametrize(
    "gated",
    [policy(paused=True), policy(approval="Manual"), policy(maxUnavailable=1)],
    ids=["paused", "waiting-for-approval", "waiting-for-a-slot"],
)
def test_a_fresh_member_waiting_its_turn_gets_no_write(gated: RolloutSpec) -> None:
    """Issue 13, item 4: the taint took whole pools out of scheduling outside the budget."""
    busy = node("gpu-0", st=state(rollout.Phase.VERIFYING), config=NEW, agent="pending")
    busy = replace(busy, unschedulable=True, taints=(GEOMETRY_PENDING,))
    nodes = [busy, _fresh()]
    want = {n.name: desired() for n in nodes}
    plan = rollout.plan(POOL, gated, want, nodes, [], [], T0)
    assert not [a for a in plan.actions if a.node == "gpu-1"], plan.actions
    assert plan.counts.pending == 1


def test_a_fresh_member_is_tainted_only_when_admitted() -> None:
    plan = rollout.plan(POOL, policy(), {"gpu-1": desired()}, [_fresh()], [], [], T0)
    assert [type(a) for a in plan.actions] == [act.SetNodeState, act.AddTaint, act.Cordon]


def test_another_pools_held_node_is_not_held_by_us() -> None:
    fresh = _fresh(pending_taint(OTHER))
    assert fresh.held_by(OTHER)
    assert not fresh.held_by(POOL)


def test_an_ownerless_taint_or_our_state_is_ours_to_clean_up() -> None:
    assert _fresh(GEOMETRY_PENDING).held_by(POOL)  # written before taints carried names
    held = replace(_fresh(pending_taint(OTHER)), state=state(rollout.Phase.CORDONED))
    assert held.held_by(POOL) and not held.held_by(OTHER)  # the state decides
    assert not _fresh().held_by(POOL)


def test_a_node_that_left_the_pool_is_released_by_the_pool_that_tainted_it() -> None:
    plan = rollout.plan(POOL, policy(), {}, [_fresh(pending_taint(POOL))], [], [], T0)
    assert [type(a) for a in plan.actions] == [act.RemoveTaint]


def test_long_owner_names_fit_a_taint_value() -> None:
    value = pending_taint(f"NodePoolGeometry/{'x' * 240}").value
    assert len(value) <= 63 and value[-1].isalnum()
    assert value != pending_taint(f"NodePoolGeometry/{'x' * 239}").value
