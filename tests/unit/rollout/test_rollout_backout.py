"""Deletion: every node is finished or backed out, and no Tessera cordon is left behind."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rollout_builders import POOL, T0, kinds, policy, secs, state

from builders.views import NEW, node
from tessera.domain.rollout.backout import backout
from tessera.domain.rollout.state import Phase
from tessera.domain.rollout.views import NodeView

RELEASE = [
    "SetNodeState:Uncordoning",
    "RemoveTaint:gpu-1",
    "Uncordon:gpu-1",
    "ClearNodeState:gpu-1",
]

CASES = {
    "draining node is released at once": (
        [node(st=state(Phase.DRAINING), cordoned=True, tainted=True)],
        RELEASE,
        True,
    ),
    "blocked node is released": (
        [node(st=state(Phase.BLOCKED), cordoned=True, tainted=True)],
        RELEASE,
        True,
    ),
    "failed node is released (no Tessera cordon may outlive the object)": (
        [node(st=state(Phase.FAILED), config=NEW, agent="failed", cordoned=True, tainted=True)],
        RELEASE,
        True,
    ),
    "admin-cordoned node keeps its cordon": (
        [node(st=replace(state(Phase.DRAINING), orig=True), cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "ClearNodeState:gpu-1"],
        True,
    ),
    "node mid-verification finishes first": (
        [node(st=state(Phase.VERIFYING), config=NEW, agent="pending", cordoned=True, tainted=True)],
        [],
        False,
    ),
    "tainted node without state loses the taint": (
        [node(tainted=True)],
        ["RemoveTaint:gpu-1"],
        True,
    ),
    "another owner's node is left alone": (
        [
            node(
                st=replace(state(Phase.DRAINING), owner="SharingPolicy/x"),
                cordoned=True,
                tainted=True,
            )
        ],
        [],
        True,
    ),
    "unreadable state is cleared but the cordon stays": (
        [node(cordoned=True, tainted=True, state_error="not JSON")],
        ["RemoveTaint:gpu-1", "ClearNodeState:gpu-1"],
        True,
    ),
    "nothing left: done": ([node()], [], True),
}


@pytest.mark.parametrize(("nodes", "want", "done"), CASES.values(), ids=CASES.keys())
def test_backout(nodes: list[NodeView], want: list[str], done: bool) -> None:
    got = backout(POOL, policy(), nodes, T0)
    assert kinds(got.actions) == want
    assert got.done is (done and not want)


def test_verification_that_times_out_is_released() -> None:
    n = node(st=state(Phase.VERIFYING), config=NEW, agent="pending", cordoned=True, tainted=True)
    assert kinds(backout(POOL, policy(), [n], T0 + secs(16 * 60)).actions) == RELEASE


def test_unreadable_state_is_reported() -> None:
    got = backout(POOL, policy(), [node(cordoned=True, state_error="bad")], T0)
    assert got.warnings == ("gpu-1 left cordoned: its original state was unreadable",)
