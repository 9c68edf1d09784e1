"""When a pass may be skipped: only when nothing it reads changed since one that changed nothing."""

from __future__ import annotations

from typing import Any

import pytest

from builders import NodeWrapper
from tessera.controllers.skipping import NodeChanges, Passes
from tessera.domain.base.conditions import Verdict
from tessera.domain.base.idle import Converged, converged, node_fingerprint, skip

READY = Verdict("ready", "Converged", "")
STALLED = Verdict("stalled", "NoNodes", "")
ROLLING = Verdict("progressing", "RollingOut", "")
WINDOW = Verdict("progressing", "OutsideWindow", "")
INPUTS = (7, "rv-1", (("gpu", "uid", 1),), "cm-3")


@pytest.mark.parametrize(
    ("last", "inputs", "now", "skipped"),
    [
        (None, INPUTS, 10.0, False),  # nothing converged yet: run
        (Converged(INPUTS, 0.0), None, 10.0, False),  # Node changes not followed: run
        (Converged(INPUTS, 0.0), INPUTS, 10.0, True),  # nothing changed: skip
        (Converged(INPUTS, 0.0), (8, *INPUTS[1:]), 10.0, False),  # a Node changed
        (Converged(INPUTS, 0.0), (7, "rv-2", *INPUTS[2:]), 10.0, False),  # the object changed
        (Converged(INPUTS, 0.0), (*INPUTS[:3], "cm-4"), 10.0, False),  # a ConfigMap edited
        (Converged(INPUTS, 0.0), (*INPUTS[:3], None), 10.0, False),  # a ConfigMap deleted
        (Converged(INPUTS, 0.0), INPUTS, 99.9, True),  # just before the full pass is due
        (Converged(INPUTS, 0.0), INPUTS, 100.0, False),  # a full pass is due
    ],
)
def test_skip(last: Converged | None, inputs: Any, now: float, skipped: bool) -> None:
    assert skip(last, inputs, now, full_every=100.0) is skipped


@pytest.mark.parametrize(
    ("verdict", "wrote", "requeue", "starved", "expected"),
    [
        (READY, False, None, False, True),  # nothing to do, nothing done
        (STALLED, False, None, False, True),  # waits for a person: only a change moves it
        (READY, True, None, False, False),  # it wrote: the next pass must look again
        (ROLLING, False, 1.0, False, False),  # a rollout in flight
        (WINDOW, False, None, False, False),  # a gate the clock alone opens
        (STALLED, False, None, True, False),  # waits for room: wakes on a change, not skipped
        (READY, False, 5.0, False, False),  # asked to look again soon
    ],
)
def test_converged(
    verdict: Verdict, wrote: bool, requeue: float | None, starved: bool, expected: bool
) -> None:
    assert converged(verdict, wrote=wrote, requeue_after=requeue, starved=starved) is expected


def _node(**labels: str) -> dict[str, Any]:
    built = NodeWrapper("gpu-1").meta(resourceVersion="1").labels(labels)
    built = built.allocatable({"nvidia.com/gpu": "8"}).ready()
    return built.heartbeat("2026-01-01T00:00:00Z").obj()


def test_a_heartbeat_is_no_change_a_label_is() -> None:
    node = _node(pool="a")
    beat = _node(pool="a")
    beat["metadata"]["resourceVersion"] = "2"
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:05:00Z"
    assert node_fingerprint(beat) == node_fingerprint(node)
    assert node_fingerprint(_node(pool="b")) != node_fingerprint(node)
    cordoned = {**node, "spec": {"unschedulable": True}}
    assert node_fingerprint(cordoned) != node_fingerprint(node)


def test_passes_skip_only_after_a_converged_pass_with_the_same_inputs() -> None:
    clock = [0.0]
    nodes = NodeChanges()
    passes = Passes(nodes, full_every=100.0, clock=lambda: clock[0])
    key = ("SharingPolicy", "a")
    first = passes.inputs(key, lambda: ("rv-1",))
    assert not passes.skip(key, first)
    passes.done(key, first, converged=True)
    clock[0] = 60.0
    assert passes.skip(key, passes.inputs(key, lambda: ("rv-1",)))
    nodes.bump()  # a Node changed (the watch counted it before waking the daemon)
    moved = passes.inputs(key, lambda: ("rv-1",))
    assert not passes.skip(key, moved)
    passes.done(key, moved, converged=False)  # that pass wrote: forget the converged one
    assert not passes.skip(key, moved)
    passes.done(key, moved, converged=True)
    assert passes.skip(key, passes.inputs(key, lambda: ("rv-1",)))
    passes.forget(key)  # deleted
    assert not passes.skip(key, moved)


def test_after_two_busy_passes_inputs_are_not_read_until_one_converged() -> None:
    """A rollout's passes never converge: reading their inputs each time was wasted."""
    passes = Passes(NodeChanges(), full_every=100.0, clock=lambda: 0.0)
    key, reads = ("NodePoolGeometry", "a"), []

    def read() -> tuple[str]:
        reads.append("read")
        return ("rv-1",)

    passes.done(key, passes.inputs(key, read), converged=False)  # a rollout pass
    passes.done(key, passes.inputs(key, read), converged=False)  # and another
    busy = passes.inputs(key, read)
    assert busy is None and reads == ["read"] * 2
    assert not passes.skip(key, busy)
    passes.done(key, busy, converged=True)  # the rollout finished: nothing to compare with
    calm = passes.inputs(key, read)
    assert calm is not None and not passes.skip(key, calm)  # one full pass more
    passes.done(key, calm, converged=True)
    assert passes.skip(key, passes.inputs(key, read))
    assert reads == ["read"] * 4


def test_a_change_one_pass_writes_and_the_next_finds_done_needs_no_full_pass_more() -> None:
    """A label change: a pass writes every node, the next converges. Its inputs are read,
    with the Node counter taken once the watch has counted those writes (``settle``), so
    the resync after it is skipped — 10,000 nodes are not planned again for nothing."""
    nodes, reads = NodeChanges(), []

    def settle() -> None:
        reads.append("settle")
        for _ in range(3):
            nodes.bump()  # the watch delivers the writes of the pass before

    passes = Passes(nodes, full_every=100.0, clock=lambda: 0.0, settle=settle)
    key = ("SharingPolicy", "a")
    passes.done(key, passes.inputs(key, lambda: ("rv-1",)), converged=False)  # it wrote
    after = passes.inputs(key, lambda: ("rv-1",))
    assert after == (6, "rv-1") and reads == ["settle", "settle"]
    passes.done(key, after, converged=True)
    assert passes.skip(key, (6, "rv-1"))  # the resync: nothing moved since


def test_without_a_node_watch_nothing_is_read_and_nothing_skipped() -> None:
    passes = Passes(None, full_every=100.0)

    def read() -> tuple[str]:
        raise AssertionError("read without a watch to compare with")

    inputs = passes.inputs(("SharingPolicy", "a"), read)
    passes.done(("SharingPolicy", "a"), inputs, converged=True)
    assert inputs is None and not passes.skip(("SharingPolicy", "a"), inputs)


def test_a_slim_node_decides_as_the_node_it_came_from() -> None:
    from tessera.domain.base.idle import slim_node
    from tessera.domain.cluster.objects import node_view, sharing_facts

    node = _node(pool="a", **{"nvidia.com/device-plugin.config": "sp-a"})
    node["metadata"] |= {"annotations": {"tessera.io/x": "1"}, "managedFields": [{"m": 1}]}
    node["spec"] = {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]}
    node["status"] |= {"nodeInfo": {"kubeletVersion": "fake"}, "images": [{"names": ["a"]}]}
    node["status"]["conditions"].append({"type": "MemoryPressure", "status": "False"})
    slim = slim_node(node)
    assert node_view(slim) == node_view(node)
    assert sharing_facts(slim) == sharing_facts(node)
    assert node_fingerprint(slim) == node_fingerprint(node)
    assert "managedFields" not in slim["metadata"] and "nodeInfo" not in slim["status"]


def test_nodes_alike_share_one_target_and_each_gets_its_own() -> None:
    from tessera.api import constants as c
    from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
    from tessera.domain.cluster.pools import target_for, targets_for

    spec = NodePoolGeometrySpec.model_validate(
        {
            "nodeSelector": {"matchLabels": {"pool": "a"}},
            "mig": {"layouts": [{"profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]},
        }
    )
    h100 = {c.GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3", c.GPU_COUNT_LABEL: "8"}
    a100 = {c.GPU_PRODUCT_LABEL: "NVIDIA-A100-SXM4-40GB", c.GPU_COUNT_LABEL: "8"}
    whole, split = {"nvidia.com/gpu": 8}, {"nvidia.com/mig-1g.5gb": 56}
    nodes = [
        ("h1", h100, whole),
        ("h2", {**h100, "x": "y"}, whole),
        ("h3", h100, split),  # advertises what the target must take away
        ("a1", a100, whole),
        ("bad", {}, whole),  # no GPU Feature Discovery label: invalid, named so
    ]
    shared = targets_for("a", spec, nodes)
    assert shared == {n: target_for("a", spec, labels, alloc) for n, labels, alloc in nodes}
    assert shared["h1"] is shared["h2"] and shared["h3"] != shared["h1"] != shared["a1"]


def test_no_pass_is_skipped_while_the_node_watch_is_not_following() -> None:
    following = [True]
    passes = Passes(NodeChanges(), full_every=100.0, following=lambda: following[0])
    key = ("SharingPolicy", "a")
    passes.done(key, passes.inputs(key, lambda: ("rv-1",)), converged=True)
    assert passes.skip(key, passes.inputs(key, lambda: ("rv-1",)))
    following[0] = False  # the watch's thread died, or it re-lists after an error
    down = passes.inputs(key, lambda: ("rv-1",))
    assert down is None and not passes.skip(key, down)


def test_inputs_that_fail_to_read_in_any_way_run_the_pass_in_full() -> None:
    from types import SimpleNamespace

    from tessera.controllers.skeleton import _inputs

    def read(*_: Any) -> tuple[str]:
        raise KeyError("metadata")  # not an ApiError: a body this version cannot read

    ctx = SimpleNamespace(passes=Passes(NodeChanges(), full_every=100.0))
    kind = SimpleNamespace(inputs=read, kind="SharingPolicy")
    assert _inputs(ctx, kind, ("SharingPolicy", "a"), {"metadata": {"name": "a"}}) is None  # type: ignore[arg-type]


def _changed(field: str) -> dict[str, Any]:
    node = _node(pool="a")
    node["metadata"]["annotations"] = {"tessera.io/state": "1"}
    node["spec"] = {"unschedulable": False, "taints": [{"key": "k", "effect": "NoSchedule"}]}
    if field == "labels":
        node["metadata"]["labels"]["pool"] = "b"
    elif field == "annotations":
        node["metadata"]["annotations"]["tessera.io/state"] = "2"
    elif field == "unschedulable":
        node["spec"]["unschedulable"] = True
    elif field == "taints":
        node["spec"]["taints"][0]["effect"] = "NoExecute"
    elif field == "allocatable":
        node["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    elif field == "Ready":
        node["status"]["conditions"][0]["status"] = "False"
    return node


@pytest.mark.parametrize(
    "field", ["labels", "annotations", "unschedulable", "taints", "allocatable", "Ready"]
)
def test_each_field_a_decision_reads_changes_the_fingerprint(field: str) -> None:
    assert node_fingerprint(_changed(field)) != node_fingerprint(_changed(""))


def test_a_node_with_null_fields_has_a_fingerprint() -> None:
    node = {"metadata": {"name": "a", "labels": None}, "spec": None, "status": {"conditions": None}}
    assert node_fingerprint(node) == node_fingerprint({"metadata": {"name": "a"}})
