"""How the driver runs a plan's stages: nodes side by side, stages one after the other.

The writes themselves need the API server (tests/integration); the order the
executor promises is checked here with a recording ``do``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from tessera.controllers.rollout_driver import run_stages
from tessera.domain.rollout import actions as act


def cordon(node: str) -> act.Action:
    return act.Cordon(node, "test")


def uncordon(node: str) -> act.Action:
    return act.Uncordon(node, "test")


class Recorder:
    def __init__(self, failing: Sequence[act.Action] = ()) -> None:
        self.done: list[act.Action] = []
        self.failing = list(failing)
        self.lock = threading.Lock()

    def __call__(self, action: act.Action) -> bool:
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

    def do(action: act.Action) -> bool:
        both_inside.wait()  # deadlocks (and times out) if the two nodes ran one by one
        return True

    assert run_stages([[cordon("a"), cordon("b")]], do, at_once=2)
