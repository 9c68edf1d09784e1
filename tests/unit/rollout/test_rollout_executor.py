"""How the driver runs a plan: stages in turn, nodes side by side, a node's patches as one write.

The writes themselves need the API server (tests/integration); the order the
executor promises and the patch it composes are checked here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from rollout_builders import state

from tessera.controllers.rollout.driver import run_stages
from tessera.controllers.rollout.node_patch import compose, runs
from tessera.controllers.runtime import STOPPING, stopping
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.state import Phase
from tessera.domain.rollout.views import GEOMETRY_PENDING, Taint

OTHER = {"key": "example.com/maintenance", "effect": "NoSchedule"}
PENDING = {"key": GEOMETRY_PENDING.key, "effect": "NoSchedule"}


def cordon(node: str) -> act.Action:
    return act.Cordon(node, "test")


def uncordon(node: str) -> act.Action:
    return act.Uncordon(node, "test")


class Recorder:
    """A chain runner that records what landed and fails on the given actions."""

    def __init__(self, failing: Sequence[act.Action] = ()) -> None:
        self.done: list[act.Action] = []
        self.failing = list(failing)
        self.lock = threading.Lock()

    def __call__(self, chain: Sequence[act.Action]) -> bool:
        for action in chain:
            if action in self.failing:
                return False
            with self.lock:
                self.done.append(action)
        return True


def test_one_nodes_actions_keep_their_order_and_every_stage_runs() -> None:
    release = [uncordon(f"n{i}") for i in range(6)] + [cordon(f"n{i}") for i in range(6)]
    admit = [cordon("m1"), cordon("m2")]
    do = Recorder()
    assert run_stages([release, admit], do, at_once=4)
    assert sorted(map(repr, do.done)) == sorted(map(repr, release + admit))
    for i in range(6):  # per node: the uncordon before the cordon, as planned
        mine = [a for a in do.done if a.node == f"n{i}"]
        assert mine == [uncordon(f"n{i}"), cordon(f"n{i}")]
    assert set(do.done[-2:]) == set(admit)  # the second stage only after the whole first


def test_a_failed_write_stops_that_node_and_every_later_stage_but_not_other_nodes() -> None:
    release = [uncordon("a"), cordon("a"), uncordon("b"), cordon("b")]
    admit = [cordon("c")]
    do = Recorder(failing=[uncordon("a")])
    assert not run_stages([release, admit], do, at_once=4)
    assert do.done == [uncordon("b"), cordon("b")]


def test_nodes_of_one_stage_really_run_at_the_same_time() -> None:
    both_inside = threading.Barrier(2, timeout=10)

    def chain(actions: Sequence[act.Action]) -> bool:
        both_inside.wait()  # breaks (and times out) if the two nodes ran one by one
        return True

    assert run_stages([[cordon("a"), cordon("b")]], chain, at_once=2)


def test_consecutive_node_patches_form_one_run_and_evictions_stand_alone() -> None:
    evict = act.Evict("n", "ml", "a", "uid", "drain")
    chain = [act.SetNodeState("n", state(Phase.DRAINING), "x"), evict, cordon("n"), uncordon("n")]
    assert runs(chain) == [[chain[0]], [evict], [cordon("n"), uncordon("n")]]


ADMIT = [
    act.SetNodeState("n", state(Phase.CORDONED), "admit"),
    act.AddTaint("n", GEOMETRY_PENDING, "admit"),
    cordon("n"),
]
RELEASE = [
    act.SetNodeState("n", state(Phase.UNCORDONING), "release"),
    act.RemoveTaint("n", GEOMETRY_PENDING, "release"),
    uncordon("n"),
    act.ClearNodeState("n", "release"),
]


def annotations(patch: dict[str, Any]) -> dict[str, Any]:
    return dict(patch["metadata"]["annotations"])


def test_admission_is_one_patch_keeping_other_taints() -> None:
    patch = compose(ADMIT, [OTHER])
    assert patch["spec"] == {"unschedulable": True, "taints": [OTHER, PENDING]}
    assert annotations(patch)["tessera.io/rollout-phase"] == "Cordoned"


def test_release_is_one_patch_that_leaves_no_state_behind() -> None:
    patch = compose(RELEASE, [PENDING, OTHER])
    assert patch["spec"] == {"unschedulable": None, "taints": [OTHER]}
    assert set(annotations(patch).values()) == {None}  # the last write of the run wins


@pytest.mark.parametrize(
    ("run", "taints", "want"),
    [
        ([act.AddTaint("n", GEOMETRY_PENDING, "x")], [PENDING], {}),
        ([act.RemoveTaint("n", GEOMETRY_PENDING, "x")], [OTHER], {}),
        ([act.RemoveTaint("n", GEOMETRY_PENDING, "x")], [PENDING], {"spec": {"taints": None}}),
        (
            [act.AddTaint("n", Taint(GEOMETRY_PENDING.key, "NoSchedule", "pool.a"), "x")],
            [PENDING],
            {"spec": {"taints": [{**PENDING, "value": "pool.a"}]}},
        ),
    ],
    ids=["already-there", "already-gone", "last-one-removed", "value-changed"],
)
def test_taint_edits_write_only_what_changes(
    run: list[act.Action], taints: list[dict[str, Any]], want: dict[str, Any]
) -> None:
    assert compose(run, taints) == want


def test_labels_and_state_need_no_read() -> None:
    run = [
        act.SetNodeState("n", state(Phase.VERIFYING), "apply"),
        act.SetNodeLabels("n", {"nvidia.com/mig.config": "new", "nvidia.com/mig.config.state": None}, "apply"),
    ]  # fmt: skip
    patch = compose(run)
    assert patch["metadata"]["labels"] == {
        "nvidia.com/mig.config": "new",
        "nvidia.com/mig.config.state": None,
    }
    assert "spec" not in patch


def test_a_stopping_replica_finishes_the_stage_in_flight_but_admits_nothing() -> None:
    release, admit = [uncordon("a")], [cordon("b")]
    do = Recorder()
    asked: list[bool] = []

    def proceed() -> bool:
        asked.append(True)
        return False  # kopf stopped (or paused) the daemon during the first stage

    assert not run_stages([release, admit], do, proceed=proceed)
    assert do.done == release and asked == [True]


def test_the_daemons_stop_flag_reaches_the_pass_in_its_worker_thread() -> None:
    """The daemon sets STOPPING in its task; asyncio.to_thread copies it into the pass."""

    async def daemon(flag: list[bool]) -> bool:
        STOPPING.set(lambda: flag[0])
        flag[0] = True  # the stop arrives while the pass is being started
        return await asyncio.to_thread(stopping)

    assert asyncio.run(daemon([False])) is True
    assert stopping() is False  # outside a daemon nothing is stopping
