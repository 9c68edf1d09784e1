"""NodePoolGeometry rollouts on the real API server with simulated GPU agents and kubelet."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from builders import (
    LAYOUT_A,
    LAYOUT_A100,
    LAYOUT_B,
    QUICK_ROLLOUT,
    GeometryWrapper,
    PdbWrapper,
    custom,
)
from devcluster import fleet, gpunode
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from . import story_support as story
from .conftest import OperatorProcess
from .helpers import (
    app_pods,
    condition,
    eventually,
    gpu_agents,
    namespace,
    nodes_of,
    serve,
    wait_running,
)

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"


@pytest.fixture(scope="module")
def agents(kube: Kube) -> Iterator[None]:
    with gpu_agents(kube):
        yield


def _pool_spec(pool: str, layout: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    built = GeometryWrapper(pool).layout(layout).rollout(**QUICK_ROLLOUT).rollout(**rollout)
    spec: dict[str, Any] = built.obj()["spec"]
    return spec


def _npg(kube: Kube, name: str) -> dict[str, Any] | None:
    return kube.get_or_none(f"{NPG}/{name}")


def _ready(kube: Kube, name: str) -> bool:
    obj = _npg(kube, name)
    cond = condition(obj, "Ready")
    return bool(
        obj
        and cond
        and cond["status"] == "True"
        and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    )


def _nodes(kube: Kube, pool: str) -> list[dict[str, Any]]:
    return kube.list("/api/v1/nodes", label_selector=f"{c.POOL_LABEL}={pool}")


class DisruptionRecorder(threading.Thread):
    """Watches a pool's Nodes and records the most nodes disrupted at any one instant."""

    def __init__(self, kube: Kube, pool: str) -> None:
        super().__init__(daemon=True)
        self.kube, self.pool = kube, pool
        self.disrupted: dict[str, bool] = {}
        self.worst = 0
        self.events = 0
        self.stopped = threading.Event()
        items, self.version = kube.list_with_version(
            "/api/v1/nodes", label_selector=f"{c.POOL_LABEL}={pool}"
        )
        for node in items:
            self._see(node)

    def _see(self, node: dict[str, Any]) -> None:
        ready = any(
            x["type"] == "Ready" and x["status"] == "True" for x in node["status"]["conditions"]
        )
        self.disrupted[node["metadata"]["name"]] = (
            bool(node["spec"].get("unschedulable")) or not ready
        )
        self.worst = max(self.worst, sum(self.disrupted.values()))
        self.events += 1

    def run(self) -> None:
        while not self.stopped.is_set():
            for kind, node in self.kube.watch(
                "/api/v1/nodes",
                resource_version=self.version,
                label_selector=f"{c.POOL_LABEL}={self.pool}",
                timeout_seconds=5,
            ):
                if kind in ("ADDED", "MODIFIED"):
                    self.version = node["metadata"]["resourceVersion"]
                    self._see(node)


def test_six_node_pool_never_exceeds_max_unavailable(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    fleet.create_nodes(kube, fleet.pool("npg-six", "H100-80GB", 6))
    recorder = DisruptionRecorder(kube, "npg-six")
    recorder.start()
    kube.create(
        NPG,
        custom("NodePoolGeometry", "npg-six", _pool_spec("npg-six", LAYOUT_A, maxUnavailable=2)),
    )
    eventually(lambda: _ready(kube, "npg-six"), 120, "npg-six Ready")
    recorder.stopped.set()
    assert 0 < recorder.worst <= 2, recorder.worst
    obj = _npg(kube, "npg-six")
    assert obj is not None
    assert obj["status"]["nodes"]["updated"] == obj["status"]["nodes"]["total"] == 6
    assert obj["status"]["capacity"]["nvidia.com/mig-1g.10gb"] == str(6 * 8 * 2)
    for node in _nodes(kube, "npg-six"):
        assert not node["spec"].get("unschedulable")
        assert node["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "8"
        assert c.NODE_STATE_ANNOTATION not in node["metadata"].get("annotations", {})
        assert not any(
            t["key"] == c.GEOMETRY_PENDING_TAINT for t in node["spec"].get("taints") or []
        )


def test_a_converged_pool_gets_no_writes(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    eventually(lambda: _ready(kube, "npg-six"), 120, "npg-six Ready")
    _, version = kube.list_with_version("/api/v1/nodes", label_selector=f"{c.POOL_LABEL}=npg-six")
    # Watch the pool's nodes across more than two resync intervals (5 s each): the
    # server ends the watch after 12 s, and not one write may arrive in that window.
    writes = [
        (kind, node["metadata"]["name"], _writer(node))
        for kind, node in kube.watch(
            "/api/v1/nodes",
            resource_version=version,
            label_selector=f"{c.POOL_LABEL}=npg-six",
            timeout_seconds=12,
        )
        if kind != "BOOKMARK"
    ]
    assert writes == []


def _writer(obj: dict[str, Any]) -> str:
    """The field manager of the newest managedFields entry: who made a write that should not be."""
    entries = obj["metadata"].get("managedFields") or []
    newest = max(entries, key=lambda e: e.get("time") or "", default={})
    return str(newest.get("manager", "?"))


def test_a_hand_edit_of_the_agent_configmap_is_repaired_while_idle_passes_are_skipped(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    eventually(lambda: _ready(kube, "npg-six"), 120, "npg-six Ready")
    mark = len(operator.log())
    skipped = "nodepoolgeometry/npg-six: pass skipped"
    eventually(lambda: skipped in operator.log()[mark:], 30, "an idle resync pass skipped")
    config = _nodes(kube, "npg-six")[0]["metadata"]["labels"][c.MIG_CONFIG_LABEL]
    path = path_of(
        "v1", "configmaps", c.MIG_PARTED_CONFIGMAP_NAME, c.MIG_PARTED_CONFIGMAP_NAMESPACE
    )
    kube.patch(path, {"data": {c.MIG_PARTED_CONFIGMAP_KEY: "version: v1\nmig-configs: {}\n"}})
    # Nothing wakes a pool on this ConfigMap: only its resync (5 s here) sees the edit, as a
    # changed input, so that pass runs in full and writes the configs the labels name again.
    eventually(
        lambda: config in kube.get(path)["data"][c.MIG_PARTED_CONFIGMAP_KEY],
        30,
        "the pool's configs restored",
    )


def test_pdb_allowing_no_disruption_blocks_until_relaxed(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    fleet.create_nodes(kube, story.nodes("npg-pdb", model="A100-40GB"))
    namespace(kube, "npg-pdb-ns")
    # One replica on the pool's node (the only one it may use until the spare comes), under a
    # PDB that lets none go; the spare is room elsewhere, so only the PDB holds the drain.
    [pod] = serve(kube, "npg-pdb-ns", "serving", node_selector={story.SERVES: "npg-pdb"})
    assert pod["spec"]["nodeName"] == "npg-pdb-0"
    pdb = PdbWrapper("serving-pdb").min_available(1).match(app="serving").obj()
    kube.create("/apis/policy/v1/namespaces/npg-pdb-ns/poddisruptionbudgets", pdb)
    spare = story.spare(kube, "npg-pdb")
    spec = _pool_spec("npg-pdb", LAYOUT_A100)
    spec["rollout"]["drain"] = {"timeout": "2s"}
    kube.create(NPG, custom("NodePoolGeometry", "npg-pdb", spec))

    def stalled() -> dict[str, Any] | None:
        cond = condition(_npg(kube, "npg-pdb"), "Stalled")
        return cond if cond and cond["status"] == "True" else None

    cond = eventually(stalled, 60, "Stalled DrainBlocked")
    assert "npg-pdb-ns/serving-pdb" in cond["message"], cond
    [live] = app_pods(kube, "npg-pdb-ns", "serving", live=False)
    assert live["metadata"]["uid"] == pod["metadata"]["uid"]
    assert not live["metadata"].get("deletionTimestamp")
    kube.patch(
        "/apis/policy/v1/namespaces/npg-pdb-ns/poddisruptionbudgets/serving-pdb",
        {"spec": {"minAvailable": 0}},
    )
    eventually(lambda: _ready(kube, "npg-pdb"), 90, "npg-pdb Ready after relaxing the PDB")
    [again] = wait_running(kube, "npg-pdb-ns", "serving", 1)  # evicted, placed on the spare
    assert again["metadata"]["uid"] != pod["metadata"]["uid"] and nodes_of([again]) == [spare]


def test_impossible_layout_stops_before_any_cordon(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    fleet.create_nodes(kube, fleet.pool("npg-bad", "A30-24GB", 2, devices=4))
    layout = {"mig": {"layouts": [{"profiles": {"4g.24gb": 1, "1g.6gb": 1}}]}}
    kube.create(NPG, custom("NodePoolGeometry", "npg-bad", _pool_spec("npg-bad", layout)))

    def stalled() -> dict[str, Any] | None:
        cond = condition(_npg(kube, "npg-bad"), "Stalled")
        return cond if cond and cond["status"] == "True" else None

    cond = eventually(stalled, 60, "Stalled InvalidGeometryForModel")
    assert cond["reason"] == "InvalidGeometryForModel"
    assert "4g.24gb" in cond["message"] and "A30-24GB" in cond["message"]
    for node in _nodes(kube, "npg-bad"):
        assert not node["spec"].get("unschedulable")
        assert c.MIG_CONFIG_LABEL not in node["metadata"]["labels"]


@pytest.mark.parametrize("on_failure", ["Hold", "Rollback"])
def test_agent_failure(
    kube: Kube, operator: OperatorProcess, agents: None, on_failure: str
) -> None:
    pool = f"npg-fail-{on_failure.lower()}"
    node_name = f"{pool}-0"
    fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    kube.create(
        NPG, custom("NodePoolGeometry", pool, _pool_spec(pool, LAYOUT_A, onFailure=on_failure))
    )
    eventually(lambda: _ready(kube, pool), 60, "first layout applied")
    good = kube.get(path_of("v1", "nodes", node_name))["metadata"]["labels"][c.MIG_CONFIG_LABEL]
    # Hold: every apply fails. Rollback: every layout but the last good one fails.
    fail = {gpunode.FAIL: "true" if on_failure == "Hold" else f"except:{good}"}
    kube.patch(path_of("v1", "nodes", node_name), {"metadata": {"annotations": fail}})
    kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_B})

    def stalled() -> dict[str, Any] | None:
        obj = _npg(kube, pool)
        cond = condition(obj, "Stalled")
        fresh = obj and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
        return cond if fresh and cond and cond["status"] == "True" else None

    cond = eventually(stalled, 60, f"Stalled NodeFailed ({on_failure})")
    assert cond["reason"] == "NodeFailed" and node_name in cond["message"]
    if on_failure == "Hold":
        node = kube.get(path_of("v1", "nodes", node_name))
        assert (
            node["spec"].get("unschedulable") is True
        )  # held cordoned, with the condition saying why
        assert node["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] == "failed"
        return

    def rolled_back() -> bool:
        node = kube.get(path_of("v1", "nodes", node_name))
        labels = node["metadata"]["labels"]
        return (
            labels.get(c.MIG_CONFIG_LABEL) == good
            and labels.get(c.MIG_CONFIG_STATE_LABEL) == "success"
            and not node["spec"].get("unschedulable")
        )

    eventually(rolled_back, 90, "rollback to the last good layout, uncordoned")
    scraped = operator.scrape()
    assert f'tessera_rollbacks_total{{pool="{pool}"}} 1.0' in scraped
    assert 'tessera_rollout_phase_duration_seconds_count{phase="Verifying"}' in scraped


def test_new_node_joins_and_deletion_mid_rollout_leaves_nothing_cordoned(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    fleet.create_nodes(kube, fleet.pool("npg-join", "H100-80GB", 2))
    kube.create(NPG, custom("NodePoolGeometry", "npg-join", _pool_spec("npg-join", LAYOUT_A)))
    eventually(lambda: _ready(kube, "npg-join"), 90, "npg-join Ready")
    fleet.create_nodes(kube, [fleet.NodeSpec("npg-join-9", "H100-80GB", pool="npg-join")])
    eventually(
        lambda: (
            kube.get(path_of("v1", "nodes", "npg-join-9"))["status"]["allocatable"].get(
                "nvidia.com/mig-2g.20gb"
            )
            == "8"
        ),
        90,
        "joined node partitioned",
    )
    eventually(lambda: _ready(kube, "npg-join"), 90, "npg-join Ready with 3 nodes")
    # Slow the agent so the deletion lands mid-rollout.
    for node in _nodes(kube, "npg-join"):
        kube.patch(
            path_of("v1", "nodes", node["metadata"]["name"]),
            {"metadata": {"annotations": {gpunode.STUCK: "true"}}},
        )
    kube.patch(f"{NPG}/npg-join", {"spec": LAYOUT_B})
    eventually(
        lambda: any(n["spec"].get("unschedulable") for n in _nodes(kube, "npg-join")),
        60,
        "a node cordoned by the rollout",
    )
    series = 'tessera_rollout_nodes{kind="NodePoolGeometry",phase="InProgress",pool="npg-join"}'
    eventually(lambda: f"{series} 1.0" in operator.scrape(), 30, "InProgress 1 on /metrics")
    kube.delete(f"{NPG}/npg-join")
    for node in _nodes(kube, "npg-join"):
        kube.patch(
            path_of("v1", "nodes", node["metadata"]["name"]),
            {"metadata": {"annotations": {gpunode.STUCK: None}}},
        )
    eventually(lambda: _npg(kube, "npg-join") is None or None, 90, "npg-join deleted")
    assert 'pool="npg-join"' not in operator.scrape()  # a deleted pool's series are dropped
    for node in _nodes(kube, "npg-join"):
        assert not node["spec"].get("unschedulable"), node["metadata"]["name"]
        assert c.NODE_STATE_ANNOTATION not in node["metadata"].get("annotations", {})
