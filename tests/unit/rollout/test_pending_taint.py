"""A new node's pending taint says which pool holds it, so other pools leave it alone.

Found by the fault tests: with two NodePoolGeometries in a cluster, the pool
waiting to partition a fresh node tainted it, every other pool saw an ownerless
taint on a node outside its selector and lifted it, and the two wrote against
each other on every wake-up.
"""

from __future__ import annotations

from dataclasses import replace

from rollout_builders import POOL, T0, desired, node, policy, state

from tessera.domain import rollout
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.views import GEOMETRY_PENDING, pending_taint

OTHER = "NodePoolGeometry/a100"


def _fresh(taint: rollout.Taint | None = None) -> rollout.NodeView:
    return replace(node(config=None, agent=None), taints=(taint,) if taint else ())


def test_a_fresh_member_waiting_its_turn_is_tainted_with_its_pools_name() -> None:
    waiting = policy(paused=True)
    plan = rollout.plan(POOL, waiting, {"gpu-1": desired()}, [_fresh()], [], [], T0)
    added = [a for a in plan.actions if isinstance(a, act.AddTaint)]
    assert [a.taint for a in added] == [pending_taint(POOL)]
    assert added[0].taint.value == "NodePoolGeometry.h100"


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
