"""What a platform engineer sees while a node drains (issue 13, items 7 and 8).

A drain a PodDisruptionBudget holds up is named — pod and PDB — in the pool's
Reconciling condition as soon as Tessera knows, with one Warning Event per
blocked pod, while ``Stalled`` waits for ``drain.timeout``. And a drained node
takes its next step as soon as its last pod is gone: the pod's deletion wakes
the pool, it does not wait for a requeue or the resync.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import LAYOUT_A100, PdbWrapper, custom
from devcluster import fleet
from devcluster.controlplane import ControlPlane
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from . import story_support as story
from .conftest import OperatorProcess
from .helpers import app_pods, condition, eventually, gpu_agents, namespace, serve

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
LAYOUT_H100 = {"mig": {"layouts": [{"profiles": {"1g.10gb": 7}}]}}
PASSES = re.compile(
    r'^tessera_reconciles_total\{kind="NodePoolGeometry",outcome="progressing"\} (\S+)$', re.M
)


@pytest.fixture(scope="module")
def agents(kube: Kube) -> Iterator[None]:
    with gpu_agents(kube):
        yield


def _pool(kube: Kube, name: str) -> dict[str, Any] | None:
    return kube.get_or_none(f"{NPG}/{name}")


def _passes(operator: OperatorProcess) -> float:
    """Passes of NodePoolGeometries that ended progressing, from the operator's /metrics."""
    found = PASSES.search(operator.scrape())
    return float(found.group(1)) if found else 0.0


def _blocked_events(kube: Kube, pool: str) -> list[dict[str, Any]]:
    found = kube.list(
        path_of("v1", "events", namespace="default"),
        field_selector=f"involvedObject.name={pool},reason=EvictionBlocked",
    )
    return [e for e in found if e["involvedObject"]["kind"] == "NodePoolGeometry"]


def test_a_pdb_holding_up_a_drain_is_named_at_once_with_one_event_per_pod(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool, ns = "drv-pdb", "drv-pdb-ns"
    [node] = fleet.create_nodes(kube, story.nodes(pool, model="A100-40GB"))
    namespace(kube, ns)
    # One replica, on the pool's node (the only one it may use until the spare comes), under
    # a PDB that lets none go; the spare is room elsewhere, so only the PDB holds the drain.
    [pod] = serve(kube, ns, "serving", node_selector={story.SERVES: pool})
    assert pod["spec"]["nodeName"] == node
    budget = PdbWrapper("serving-pdb").match(app="serving").min_available(1).obj()
    kube.create(path_of("policy/v1", "poddisruptionbudgets", namespace=ns), budget)
    story.spare(kube, pool)
    story.counted(kube, ns, "serving-pdb", 1)
    serving = f"{ns}/{pod['metadata']['name']}"
    # drain.timeout left at its default (30m): the pool must not wait for it to say why
    spec = {"nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}}, **LAYOUT_A100}
    kube.create(NPG, custom("NodePoolGeometry", pool, spec))
    started = time.monotonic()

    def named() -> dict[str, Any] | None:
        cond = condition(_pool(kube, pool), "Reconciling")
        text = (cond or {}).get("message", "")
        return cond if serving in text and f"{ns}/serving-pdb" in text else None

    cond = eventually(named, 60, "the Reconciling message naming the pod and its PDB")
    print(f"named after {time.monotonic() - started:.1f} s: {cond['message']}")
    assert cond["status"] == "True" and cond["reason"] == "Draining", cond
    stalled = condition(_pool(kube, pool), "Stalled")
    assert stalled is None or stalled["status"] == "False", stalled  # drain.timeout is 30m
    [live] = app_pods(kube, ns, "serving", live=False)
    assert live["metadata"]["uid"] == pod["metadata"]["uid"]
    assert not live["metadata"].get("deletionTimestamp")  # the PDB is respected

    [event] = eventually(lambda: _blocked_events(kube, pool), 30, "an EvictionBlocked Event")
    assert event["type"] == "Warning"
    assert serving in event["message"] and f"{ns}/serving-pdb" in event["message"]
    assert event["involvedObject"]["uid"] == (_pool(kube, pool) or {})["metadata"]["uid"]
    for round_ in range(3):  # three more passes, each woken by a touch of the node
        before = _passes(operator)
        patch = {"metadata": {"labels": {"drv-test/touch": str(round_)}}}
        kube.patch(path_of("v1", "nodes", node), patch)
        eventually(lambda b=before: _passes(operator) > b, 30, "one more pass of the pool")
    assert len(_blocked_events(kube, pool)) == 1, "one Event per blocked pod, not one per pass"


class Timeline(threading.Thread):
    """When (test clock) a pod went away and when the node's mig.config label changed."""

    def __init__(self, kube: Kube, ns: str, node: str) -> None:
        super().__init__(daemon=True)
        self.ns, self.node = ns, node
        self.deleted: float | None = None
        self.labels: list[tuple[float, str | None]] = []
        self.pods = Informer(kube, f"/api/v1/namespaces/{ns}/pods", self._pod, name="tl-pods")
        self.nodes = Informer(
            kube, "/api/v1/nodes", self._node, name="tl-nodes",
            field_selector=f"metadata.name={node}",
        )  # fmt: skip

    def _pod(self, kind: str, _: dict[str, Any]) -> None:
        if kind == "DELETED":
            self.deleted = time.monotonic()

    def _node(self, kind: str, obj: dict[str, Any]) -> None:
        value = (obj["metadata"].get("labels") or {}).get(c.MIG_CONFIG_LABEL)
        if not self.labels or self.labels[-1][1] != value:
            self.labels.append((time.monotonic(), value))

    def __enter__(self) -> Timeline:
        for informer in (self.pods, self.nodes):
            informer.start()
            eventually(informer.synced.is_set, what=f"{informer.name} synced")
        return self

    def __exit__(self, *_: object) -> None:
        self.pods.stop()
        self.nodes.stop()

    def gap(self, target: str) -> float:
        """Seconds from the pod's deletion to the first write of ``target``."""
        assert self.deleted is not None
        written = next(t for t, value in self.labels if value == target)
        return written - self.deleted


def test_a_drained_node_moves_on_as_soon_as_its_last_pod_is_gone(
    kube: Kube,
    operator: OperatorProcess,
    control_plane: ControlPlane,
    agents: None,
    tmp_path: Path,
) -> None:
    """The operator runs here with a 60 s resync, so only a wake-up can make the step prompt
    (before the fix it came with the rollout's 10 s requeue: about 9 s after the deletion)."""
    pool, ns = "drv-wake", "drv-wake-ns"
    [node] = fleet.create_nodes(kube, story.nodes(pool))
    namespace(kube, ns)
    # One replica on the pool's node; then room for it elsewhere once it is evicted.
    [pod] = serve(kube, ns, "trainer", node_selector={story.SERVES: pool})
    assert pod["spec"]["nodeName"] == node
    story.spare(kube, pool)
    private = OperatorProcess(
        control_plane, tmp_path / "operator.log", "--resync-seconds=60",
        kubeconfig=operator.kubeconfig,
    )  # fmt: skip
    operator.kill()
    try:
        private.start()
        with Timeline(kube, ns, node) as timeline:
            spec = {"nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}}, **LAYOUT_H100}
            spec["rollout"] = {"verifyTimeout": "2m", "drain": {"timeout": "1m"}}
            kube.create(NPG, custom("NodePoolGeometry", pool, spec))

            def ready() -> bool:
                cond = condition(_pool(kube, pool), "Ready")
                return bool(cond and cond["status"] == "True")

            eventually(ready, 90, f"{pool} Ready")
    finally:
        private.stop()
        operator.start()
    private.assert_clean_log()
    target = kube.get(path_of("v1", "nodes", node))["metadata"]["labels"][c.MIG_CONFIG_LABEL]
    gap = timeline.gap(target)
    print(f"last pod deleted -> layout requested: {gap:.2f} s")
    assert 0 <= gap < 5.0, f"the node waited {gap:.1f} s after its last pod was gone"
