"""Which daemons a change wakes: only those whose pass reads what changed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from builders import NodeWrapper
from tessera.api import constants as c
from tessera.controllers import nodepoolgeometry, sharingpolicy, tenantquota
from tessera.domain.cluster.objects import geometry_owner
from tessera.domain.rollout import NodeState, Phase, PodView, TargetSpec, encode
from tessera.domain.rollout.views import pending_taint
from tessera.handlers.wakeups import (
    NodeWakeups,
    Wakeups,
    frees_room,
    object_fingerprint,
    pod_nodes,
)

NPG, SP = nodepoolgeometry.PLURAL, sharingpolicy.PLURAL


def pool(label: str) -> dict[str, Any]:
    return {"nodeSelector": {"matchLabels": {c.POOL_LABEL: label}}, "mig": {"layouts": []}}


def node(label: str, *, held_by: str = "", ready: str = "True", **extra: Any) -> dict[str, Any]:
    taints = []
    if held_by:
        taint = pending_taint(geometry_owner(held_by))
        taints = [{"key": taint.key, "effect": taint.effect, "value": taint.value}]
    built = NodeWrapper("gpu-1").label(c.POOL_LABEL, label).meta(**extra)
    return built.taints(*taints).ready(ready).obj()


def setup(*pools: str) -> tuple[Wakeups, NodeWakeups]:
    wakeups = Wakeups()
    nodes = NodeWakeups(wakeups)
    for name in pools:
        wakeups.event(NPG, name)
        nodes.pool_changed(name, pool(name))
    wakeups.event(SP, "time-sliced")
    woken(wakeups)
    return wakeups, nodes


def woken(wakeups: Wakeups) -> set[str]:
    out = {name for name in wakeups.names(NPG) if wakeups.event(NPG, name).is_set()}
    out |= {f"sp/{n}" for n in wakeups.names(SP) if wakeups.event(SP, n).is_set()}
    for plural in (NPG, SP):
        for name in wakeups.names(plural):
            wakeups.event(plural, name).clear()
    return out


def test_a_node_wakes_the_pool_that_selects_it_and_every_sharing_policy() -> None:
    wakeups, nodes = setup("a", "b")
    nodes.node_changed("gpu-1", node("a"))
    assert woken(wakeups) == {"a", "sp/time-sliced"}


def test_a_heartbeat_wakes_nobody() -> None:
    wakeups, nodes = setup("a", "b")
    nodes.node_changed("gpu-1", node("a"))
    woken(wakeups)
    nodes.node_changed("gpu-1", node("a", resourceVersion="2"))
    assert woken(wakeups) == set()


def test_a_node_moving_between_pools_wakes_both() -> None:
    wakeups, nodes = setup("a", "b", "c")
    nodes.node_changed("gpu-1", node("a"))
    woken(wakeups)
    nodes.node_changed("gpu-1", node("b"))
    assert woken(wakeups) == {"a", "b", "sp/time-sliced"}


def test_a_node_held_by_a_pool_wakes_it_even_outside_its_selector() -> None:
    wakeups, nodes = setup("a", "b")
    nodes.node_changed("gpu-1", node("other", held_by="b"))
    assert woken(wakeups) == {"b", "sp/time-sliced"}


@pytest.mark.parametrize(
    ("held", "back"),
    [
        ({"spec": {"unschedulable": True}}, {"spec": {}}),  # kubectl uncordon
        (
            {"spec": {"taints": [{"key": "example.com/maintenance", "effect": "NoSchedule"}]}},
            {"spec": {"taints": []}},
        ),  # another controller lifts its taint
        ({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}, {}),  # Ready again
    ],
    ids=["uncordon", "taint-lifted", "ready-again"],
)
def test_a_node_giving_back_the_budget_wakes_its_pool(
    held: dict[str, Any], back: dict[str, Any]
) -> None:
    """Issue 34: a pool whose budget others hold resumes by itself when they give it back."""
    wakeups, nodes = setup("a", "b")

    def changed(part: dict[str, Any]) -> None:
        body = node("a")
        for key, value in part.items():
            body[key] = {**body.get(key, {}), **value}
        nodes.node_changed("gpu-1", body)

    changed(held)
    woken(wakeups)
    changed(back)
    assert woken(wakeups) == {"a", "sp/time-sliced"}


def test_a_pool_whose_selector_is_unknown_is_always_woken() -> None:
    wakeups, nodes = setup("a")
    wakeups.event(NPG, "new")  # its daemon runs; its own event has not been seen yet
    nodes.pool_changed("broken", {"nodeSelector": "not a selector"})
    wakeups.event(NPG, "broken")
    nodes.node_changed("gpu-1", node("zzz"))
    assert woken(wakeups) == {"new", "broken", "sp/time-sliced"}


def test_a_pool_claiming_other_nodes_wakes_every_pool() -> None:
    # one node, one pool: a new, changed or deleted selector may change the others' claims
    wakeups, nodes = setup("a", "b")
    nodes.pool_changed("a", pool("a"))
    assert woken(wakeups) == set()  # the same selector again (a status write)
    nodes.pool_changed("a", pool("b"))
    assert woken(wakeups) == {"a", "b"}
    nodes.pool_changed("b", None)
    assert woken(wakeups) == {"a", "b"}


def test_a_deleted_node_wakes_the_pools_that_read_it() -> None:
    wakeups, nodes = setup("a", "b")
    nodes.node_changed("gpu-1", node("a"))
    woken(wakeups)
    nodes.node_changed("gpu-1", None)
    assert woken(wakeups) == {"a", "sp/time-sliced"}


def test_a_status_write_does_not_change_what_a_reconcile_reads() -> None:
    obj: dict[str, Any] = {"metadata": {"generation": 3}, "spec": pool("a")}
    written = {**obj, "status": {"observedGeneration": 3}}
    approved = {**obj, "metadata": {"generation": 3, "annotations": {"x": "y"}}}
    assert object_fingerprint(written) == object_fingerprint(obj)
    assert object_fingerprint(approved) != object_fingerprint(obj)


def rolling(owner: str, phase: str = "Draining") -> dict[str, Any]:
    """A node carrying ``owner``'s rollout state in ``phase``."""
    st = NodeState(Phase(phase), owner, TargetSpec("t"), orig=False, since=datetime.now(UTC))
    return node("a", annotations={c.NODE_STATE_ANNOTATION: encode(st)})


POD_WAKES = {
    "a pod gone from a node a pool drains wakes that pool only": (
        rolling(geometry_owner("b")),
        {"b"},
    ),
    "a pod gone from a node a SharingPolicy drains wakes that policy only": (
        rolling("SharingPolicy/time-sliced"),
        {"sp/time-sliced"},
    ),
    "a pod gone from a node no rollout holds wakes nobody": (node("a"), set()),
    "a pod gone from a node already verifying wakes nobody (it waits for the agent)": (
        rolling(geometry_owner("b"), "Verifying"),
        set(),
    ),
}


@pytest.mark.parametrize("body,want", POD_WAKES.values(), ids=POD_WAKES.keys())
def test_pods_changing_on_a_node_wake_the_rollout_holding_it(
    body: dict[str, Any], want: set[str]
) -> None:
    wakeups, nodes = setup("a", "b")
    nodes.node_changed("gpu-1", body)
    woken(wakeups)
    gone = PodView("ml", "serving-0", "gpu-1")
    nodes.pods_changed(pod_nodes(gone, None))
    assert woken(wakeups) == want


GPU_POD = PodView("ml", "p", "cpu-7", requests={"nvidia.com/gpu": 1})
FREES: dict[str, tuple[PodView | None, PodView | None, bool]] = {
    "deleted": (GPU_POD, None, True),
    "finished": (GPU_POD, replace(GPU_POD, phase="Succeeded"), True),
    "status change": (GPU_POD, replace(GPU_POD, labels={"x": "y"}), False),
    "terminating: still holds its node's room": (
        GPU_POD,
        replace(GPU_POD, deletion_timestamp=datetime(2026, 1, 1, tzinfo=UTC)),
        False,
    ),
    "created": (None, GPU_POD, False),
    "no accelerator": (PodView("ml", "web", "cpu-7"), None, False),
    "never bound": (replace(GPU_POD, node=""), None, False),
}


@pytest.mark.parametrize("before,after,want", FREES.values(), ids=FREES.keys())
def test_only_a_pod_giving_accelerators_back_frees_room(
    before: PodView | None, after: PodView | None, want: bool
) -> None:
    assert frees_room(before, after) is want


def test_a_pod_that_moves_names_both_nodes() -> None:
    assert pod_nodes(PodView("ml", "p", "gpu-1"), PodView("ml", "p", "gpu-2")) == {
        "gpu-1",
        "gpu-2",
    }


def test_a_pool_waiting_for_room_wakes_when_room_may_appear_until_it_stops_waiting() -> None:
    wakeups, nodes = setup("a", "b")
    wakeups.starve(NPG, "b", True)
    nodes.pods_changed({"cpu-7"})  # a pod's status changed: no accelerator given back
    assert woken(wakeups) == set()
    nodes.pods_changed({"cpu-7"}, frees_room=True)  # a pod went from a node no rollout holds
    assert woken(wakeups) == {"b"}
    nodes.node_changed("gpu-1", node("a"))  # a node came or changed, in another pool
    assert woken(wakeups) == {"a", "b", "sp/time-sliced"}
    wakeups.starve(NPG, "b", False)
    nodes.pods_changed({"cpu-7"})
    assert woken(wakeups) == set()


def test_a_node_change_is_counted_before_reading_it_can_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted: list[int] = []
    nodes = NodeWakeups(Wakeups(), changed=lambda: counted.append(1))

    def broken(*_: Any) -> Any:
        raise ValueError("a node this version cannot read")

    monkeypatch.setattr("tessera.handlers.wakeups.cluster.pools_reading", broken)
    with pytest.raises(ValueError):
        nodes.node_changed("gpu-1", node("a"))
    assert counted == [1]  # the pass that follows sees the counter moved: it is not skipped


def test_a_node_or_pool_target_change_wakes_every_tenant_quota_a_heartbeat_none() -> None:
    """The capacity ledger counts every node and every pool's target (issue 30)."""
    tq = tenantquota.PLURAL
    wakeups, nodes = setup("a")
    wakeups.event(tq, "team-a")
    nodes.node_changed("gpu-1", node("a"))
    assert wakeups.event(tq, "team-a").is_set()
    wakeups.event(tq, "team-a").clear()
    nodes.node_changed("gpu-1", node("a"))  # the same node again: a heartbeat
    assert not wakeups.event(tq, "team-a").is_set()
    nodes.pool_changed("a", pool("a"))  # a status write: the spec is the same
    assert not wakeups.event(tq, "team-a").is_set()
    nodes.pool_changed("a", {**pool("a"), "mig": {"layouts": [{"profiles": {"1g.10gb": 7}}]}})
    assert wakeups.event(tq, "team-a").is_set()
