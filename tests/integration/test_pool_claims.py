"""One node, one pool: overlapping NodePoolGeometries, and pools that select no node.

A platform engineer adds a second pool whose selector overlaps the first. The
shared nodes must not be repartitioned back and forth: an observer watching
them sees no write from Tessera, both pools say Stalled/Conflict naming each
other, and deleting one lets the other proceed. A pool added over a pool that
already serves leaves the serving pool alone. ``tessera plan`` refuses both
before anything is applied, and a selector with a typo never reads green.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import LAYOUT_A, LAYOUT_B, custom
from devcluster import fleet
from devcluster.controlplane import ControlPlane
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import condition, eventually, gpu_agents

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
SP = "/apis/tessera.io/v1alpha1/sharingpolicies"
TEAM = "example.com/team"


@pytest.fixture(scope="module")
def agents(kube: Kube) -> Iterator[None]:
    with gpu_agents(kube):
        yield


def _pool(name: str, labels: dict[str, str], layout: dict[str, Any]) -> dict[str, Any]:
    spec = {
        "nodeSelector": {"matchLabels": labels},
        **layout,
        "rollout": {"maxUnavailable": 2, "verifyTimeout": "2m", "drain": {"timeout": "1m"}},
    }
    return custom("NodePoolGeometry", name, spec)


def _stalled(kube: Kube, path: str, reason: str) -> dict[str, Any] | None:
    obj = kube.get_or_none(path)
    cond = condition(obj, "Stalled")
    ready = condition(obj, "Ready")
    current = (
        obj is not None and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    )
    ok = current and cond and cond["reason"] == reason and ready and ready["status"] == "False"
    return cond if ok else None


def _ready(kube: Kube, path: str) -> dict[str, Any] | None:
    obj = kube.get_or_none(path)
    cond = condition(obj, "Ready")
    current = (
        obj is not None and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    )
    return cond if current and cond and cond["status"] == "True" else None


def _warnings(kube: Kube, name: str, reason: str) -> list[str]:
    events = kube.list(
        path_of("v1", "events", namespace="default"), field_selector=f"involvedObject.name={name}"
    )
    return [e["message"] for e in events if e.get("reason") == reason and e["type"] == "Warning"]


def _tessera_marks(node: dict[str, Any]) -> tuple[object, ...]:
    """What Tessera writes to a node: the layout label, cordon, taints, rollout state."""
    meta = node["metadata"]
    taints = node["spec"].get("taints") or []
    return (
        (meta.get("labels") or {}).get(c.MIG_CONFIG_LABEL),
        bool(node["spec"].get("unschedulable")),
        (meta.get("annotations") or {}).get(c.NODE_STATE_ANNOTATION),
        tuple(sorted(t["key"] for t in taints if t["key"].startswith("tessera.io/"))),
    )


class MarkRecorder(threading.Thread):
    """An outside observer: every change of Tessera's marks on the watched nodes."""

    def __init__(self, kube: Kube, names: set[str]) -> None:
        super().__init__(daemon=True)
        self.kube, self.names = kube, names
        self.writes: list[tuple[str, tuple[object, ...]]] = []
        self.stopped = threading.Event()
        items, self.version = kube.list_with_version("/api/v1/nodes")
        self.marks = {n["metadata"]["name"]: _tessera_marks(n) for n in items}

    def run(self) -> None:
        while not self.stopped.is_set():
            for kind, node in self.kube.watch(
                "/api/v1/nodes", resource_version=self.version, timeout_seconds=2
            ):
                if kind not in ("ADDED", "MODIFIED"):
                    continue
                self.version = node["metadata"]["resourceVersion"]
                name, marks = node["metadata"]["name"], _tessera_marks(node)
                if name in self.names and self.marks.get(name) != marks:
                    self.writes.append((name, marks))
                self.marks[name] = marks

    def stop(self) -> list[tuple[str, tuple[object, ...]]]:
        self.stopped.set()
        self.join(timeout=10)
        return self.writes


def test_overlapping_pools_touch_no_shared_node_until_one_is_deleted(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    shared = fleet.create_nodes(kube, [fleet.NodeSpec(f"dup-{i}", "H100-80GB") for i in range(2)])
    alone = fleet.create_nodes(kube, [fleet.NodeSpec("dup-2", "H100-80GB")])
    kube.create(NPG, _pool("dup-a", {c.POOL_LABEL: "dup"}, LAYOUT_A))
    kube.create(NPG, _pool("dup-b", {TEAM: "batch"}, LAYOUT_B))
    # neither selects a node yet: a typo-like empty pool is no success
    for name, selector in (("dup-a", f"{c.POOL_LABEL}=dup"), ("dup-b", f"{TEAM}=batch")):
        empty = eventually(lambda n=name: _stalled(kube, f"{NPG}/{n}", "NoNodes"), 60, "NoNodes")
        assert f"spec.nodeSelector ({selector}) matches no node" in empty["message"]
    recorder = MarkRecorder(kube, {*shared, *alone})
    recorder.start()
    for name in shared:  # one write per node: it joins both pools at once
        kube.patch(
            path_of("v1", "nodes", name),
            {"metadata": {"labels": {c.POOL_LABEL: "dup", TEAM: "batch"}}},
        )
    kube.patch(path_of("v1", "nodes", alone[0]), {"metadata": {"labels": {c.POOL_LABEL: "dup"}}})

    def conflict(name: str, other: str) -> dict[str, Any] | None:
        # a pass between the two node writes truly sees dup-0 alone shared: wait for one after
        both = f"nodepoolgeometry/{other} also selects nodes dup-0, dup-1;"
        cond = _stalled(kube, f"{NPG}/{name}", "Conflict")
        return cond if cond and cond["message"].startswith(both) else None

    eventually(lambda: conflict("dup-a", "dup-b"), 60, "dup-a Conflict naming dup-0, dup-1")
    eventually(lambda: conflict("dup-b", "dup-a"), 60, "dup-b Conflict naming dup-0, dup-1")
    eventually(lambda: _warnings(kube, "dup-a", "Conflict"), 30, "a Warning Event on dup-a")
    eventually(lambda: _warnings(kube, "dup-b", "Conflict"), 30, "a Warning Event on dup-b")
    # more than two resyncs (5 s each): no pool writes to the shared nodes, and dup-a, in
    # conflict, starts no node at all, not even dup-2 which only it selects
    watched = kube.watch("/api/v1/nodes", resource_version=recorder.version, timeout_seconds=12)
    for _ in watched:
        pass
    writes = recorder.stop()
    assert [w for w in writes if w[0] in shared] == []
    assert [w for w in writes if w[1][:3] != (None, False, None)] == []  # no layout, cordon, state

    kube.delete(f"{NPG}/dup-b")
    eventually(lambda: _ready(kube, f"{NPG}/dup-a"), 180, "dup-a Ready once dup-b is gone")
    for name in (*shared, *alone):
        node = kube.get(path_of("v1", "nodes", name))
        assert node["metadata"]["labels"][c.MIG_CONFIG_LABEL].startswith("tessera-dup-a-"), name


def test_a_pool_added_by_mistake_leaves_a_serving_pool_alone(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    nodes = fleet.create_nodes(kube, fleet.pool("serve", "H100-80GB", 2))
    kube.create(NPG, _pool("serve", {c.POOL_LABEL: "serve"}, LAYOUT_A))
    eventually(lambda: _ready(kube, f"{NPG}/serve"), 180, "serve Ready")
    recorder = MarkRecorder(kube, set(nodes))
    recorder.start()
    kube.create(NPG, _pool("serve-typo", {c.POOL_LABEL: "serve"}, LAYOUT_B))

    lost = eventually(lambda: _stalled(kube, f"{NPG}/serve-typo", "Conflict"), 60, "Conflict")
    assert lost["message"].startswith(
        "nodepoolgeometry/serve also selects nodes serve-0, serve-1, which nodepoolgeometry/serve "
        "already holds"
    ), lost
    kept = eventually(
        lambda: (r := _ready(kube, f"{NPG}/serve")) and "serve-typo" in r["message"] and r,
        60,
        "serve names serve-typo",
    )
    assert "this pool already holds them and keeps them" in kept["message"]
    watched = kube.watch("/api/v1/nodes", resource_version=recorder.version, timeout_seconds=12)
    for _ in watched:
        pass
    assert recorder.stop() == []
    kube.delete(f"{NPG}/serve-typo")
    eventually(
        lambda: (r := _ready(kube, f"{NPG}/serve")) and "serve-typo" not in r["message"],
        60,
        "serve without the conflict",
    )


def test_an_empty_pool_still_refuses_a_layout_impossible_on_its_named_model(
    kube: Kube, operator: OperatorProcess
) -> None:
    selector = {c.POOL_LABEL: "nowhere", c.GPU_PRODUCT_LABEL: "NVIDIA-A100-SXM4-40GB"}
    kube.create(
        NPG, _pool("nowhere", selector, {"mig": {"layouts": [{"profiles": {"4g.40gb": 2}}]}})
    )
    stalled = eventually(
        lambda: _stalled(kube, f"{NPG}/nowhere", "InvalidGeometryForModel"), 60, "refused"
    )
    assert "matches no node" in stalled["message"] and "A100-40GB" in stalled["message"]
    kube.delete(f"{NPG}/nowhere")


def test_a_sharing_policy_that_selects_no_node_is_not_green(
    kube: Kube, operator: OperatorProcess
) -> None:
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: "notebok"}},
        "backend": "TimeSlicing",
        "timeSlicing": {"replicas": 2},
    }
    kube.create(SP, custom("SharingPolicy", "typo-ts", spec))
    stalled = eventually(lambda: _stalled(kube, f"{SP}/typo-ts", "NoNodes"), 60, "NoNodes")
    assert "matches no node" in stalled["message"]
    kube.delete(f"{SP}/typo-ts")


def _plan(kubeconfig: Path, *files: Path) -> tuple[int, str]:
    args = [arg for f in files for arg in ("-f", str(f))]
    run = [sys.executable, "-m", "tessera.cli.main", "plan", *args, f"--kubeconfig={kubeconfig}"]
    done = subprocess.run(run, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


def test_plan_refuses_pools_that_would_share_nodes(
    kube: Kube, operator: OperatorProcess, control_plane: ControlPlane, tmp_path: Path
) -> None:
    fleet.create_nodes(kube, fleet.pool("planned", "H100-80GB", 2))
    kube.create(NPG, _pool("planned", {c.POOL_LABEL: "planned"}, LAYOUT_A))
    over_live = tmp_path / "over-live.yaml"
    over_live.write_text(yaml.safe_dump(_pool("planned-2", {c.POOL_LABEL: "planned"}, LAYOUT_B)))
    code, out = _plan(control_plane.kubeconfig, over_live)
    assert code == 1, out
    assert (
        "NodePoolGeometry/planned-2: Conflict: nodepoolgeometry/planned also selects nodes planned-0, planned-1"
        in out
    )

    fleet.create_nodes(kube, fleet.pool("twice", "H100-80GB", 1))
    both = tmp_path / "both.yaml"
    both.write_text(
        yaml.safe_dump_all(
            [
                _pool("twice-a", {c.POOL_LABEL: "twice"}, LAYOUT_A),
                _pool("twice-b", {c.POOL_LABEL: "twice"}, LAYOUT_B),
            ]
        )
    )
    code, out = _plan(control_plane.kubeconfig, both)
    assert code == 1, out
    assert "nodepoolgeometry/twice-b also selects node twice-0" in out
    assert "nodepoolgeometry/twice-a also selects node twice-0" in out
    kube.delete(f"{NPG}/planned")
