"""A pool, its nodes, or both deleted and created again under the same names converge again.

What Argo CD's prune and re-sync does to a NodePoolGeometry, and what replacing a machine
that keeps its hostname does to a Node: the operator sees new objects (new uids) under names
it has seen before. Whatever it remembers by name — a pass's fingerprint, a node's phase, the
agent's ConfigMap entries, a state label — must not make it wait for what already happened.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from builders import LAYOUT_A, LAYOUT_B, QUICK_ROLLOUT, GeometryWrapper
from devcluster import fleet, gpunode
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import ROOT, OperatorProcess
from .helpers import condition, eventually, gpu_agents

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
SP = "/apis/tessera.io/v1alpha1/sharingpolicies"
DEADLINE = 120.0
GONE = 60.0


@pytest.fixture(scope="module")
def agents(kube: Kube) -> Iterator[None]:
    with gpu_agents(kube):
        yield


def _create_pool(kube: Kube, pool: str, layout: Mapping[str, Any]) -> None:
    kube.create(NPG, GeometryWrapper(pool).layout(layout).rollout(**QUICK_ROLLOUT).obj())


def _ready(kube: Kube, pool: str, nodes: int) -> str | None:
    """The pool's uid once it is Ready for its generation with every node updated."""
    obj = kube.get_or_none(f"{NPG}/{pool}")
    cond = condition(obj, "Ready")
    if not (obj and cond and cond["status"] == "True"):
        return None
    status = obj["status"]
    if status.get("observedGeneration") != obj["metadata"]["generation"]:
        return None
    counted = status.get("nodes") or {}
    if not counted.get("updated") == counted.get("total") == nodes:
        return None
    return str(obj["metadata"]["uid"])


def _converged(kube: Kube, pool: str, nodes: int, profile: str) -> str:
    """Wait until the pool is Ready and every node advertises ``profile``; return its uid."""
    uid = eventually(lambda: _ready(kube, pool, nodes), DEADLINE, f"{pool} Ready, {nodes} nodes")

    def advertised() -> bool:
        items = kube.list("/api/v1/nodes", label_selector=f"{c.POOL_LABEL}={pool}")
        return len(items) == nodes and all(
            int(n["status"]["allocatable"].get(f"nvidia.com/mig-{profile}", "0")) > 0
            and not n["spec"].get("unschedulable")
            for n in items
        )

    eventually(advertised, DEADLINE, f"every node of {pool} advertising mig-{profile}")
    return uid


def _delete_pool(kube: Kube, pool: str) -> None:
    """Delete the pool and wait until it is gone: nothing of its rollout is left on a node."""
    kube.delete(f"{NPG}/{pool}")
    eventually(lambda: kube.get_or_none(f"{NPG}/{pool}") is None, GONE, f"{pool} gone")
    for node in kube.list("/api/v1/nodes", label_selector=f"{c.POOL_LABEL}={pool}"):
        assert c.NODE_STATE_ANNOTATION not in node["metadata"].get("annotations", {}), node
        assert not node["spec"].get("unschedulable"), node["metadata"]["name"]
        taints = [t["key"] for t in node["spec"].get("taints") or []]
        assert c.GEOMETRY_PENDING_TAINT not in taints, (node["metadata"]["name"], taints)


def _delete_nodes(kube: Kube, names: list[str]) -> None:
    for name in names:
        kube.delete(path_of("v1", "nodes", name))
    eventually(
        lambda: all(kube.get_or_none(path_of("v1", "nodes", n)) is None for n in names),
        GONE,
        f"nodes {names} gone",
    )


def _nodes(kube: Kube, pool: str) -> list[str]:
    return fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 2))


def test_pool_and_nodes_recreated_under_their_names_converge_again(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """(a) Argo CD prunes the pool and the machines go; both come back under the same names."""
    names = _nodes(kube, "re-both")
    _create_pool(kube, "re-both", LAYOUT_A)
    first = _converged(kube, "re-both", 2, "3g.40gb")
    _delete_pool(kube, "re-both")
    _delete_nodes(kube, names)
    assert _nodes(kube, "re-both") == names
    _create_pool(kube, "re-both", LAYOUT_A)
    assert _converged(kube, "re-both", 2, "3g.40gb") != first


def test_pool_recreated_over_its_nodes_converges_to_its_new_layout(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """(b) The pool is deleted and created again (same, then another layout); nodes stay."""
    _nodes(kube, "re-pool")
    _create_pool(kube, "re-pool", LAYOUT_A)
    first = _converged(kube, "re-pool", 2, "3g.40gb")
    _delete_pool(kube, "re-pool")
    _create_pool(kube, "re-pool", LAYOUT_A)
    second = _converged(kube, "re-pool", 2, "3g.40gb")
    assert second != first
    _delete_pool(kube, "re-pool")
    _create_pool(kube, "re-pool", LAYOUT_B)
    assert _converged(kube, "re-pool", 2, "1g.10gb") != second


def test_nodes_replaced_under_their_names_converge_under_the_same_pool(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """(c) The pool stays; its machines are replaced, the new Nodes keeping the old names."""
    names = _nodes(kube, "re-nodes")
    _create_pool(kube, "re-nodes", LAYOUT_B)
    uid = _converged(kube, "re-nodes", 2, "1g.10gb")
    _delete_nodes(kube, names)
    assert _nodes(kube, "re-nodes") == names
    assert _converged(kube, "re-nodes", 2, "1g.10gb") == uid


def _samples(pool: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """config/samples' H100 pool and the SharingPolicy time-slicing it, renamed ``pool``."""
    npg = yaml.safe_load((ROOT / "config/samples/nodepoolgeometry_h100.yaml").read_text())
    policy = yaml.safe_load((ROOT / "config/samples/sharingpolicy_timeslicing.yaml").read_text())
    npg["metadata"]["name"] = policy["spec"]["poolRef"]["name"] = pool
    npg["spec"]["nodeSelector"]["matchLabels"] = {c.POOL_LABEL: pool}
    policy["metadata"]["name"] = f"{pool}-timeslice"
    return npg, policy


def _observed(kube: Kube, pool: str) -> str | None:
    """The pool's Ready condition once the operator has written its status for it."""
    obj = kube.get_or_none(f"{NPG}/{pool}") or {"metadata": {}}
    seen = (obj.get("status") or {}).get("observedGeneration") == obj["metadata"].get("generation")
    return (condition(obj, "Ready") or {}).get("reason") if seen else None


def _policy_ready(kube: Kube, name: str) -> bool:
    obj = kube.get_or_none(f"{SP}/{name}")
    cond = condition(obj, "Ready")
    return bool(
        obj
        and cond
        and cond["status"] == "True"
        and obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
    )


def test_samples_pruned_before_their_nodes_came_converge_once_synced_again(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """(d) The samples' pool and its policy are applied with no node yet, pruned, then the
    nodes come and Argo CD syncs both again: what the demo does after the API surface tests."""
    npg, policy = _samples("re-sample")
    kube.create(NPG, npg)
    kube.create(SP, policy)
    eventually(lambda: _observed(kube, "re-sample"), DEADLINE, "re-sample's status written")
    kube.delete(f"{SP}/re-sample-timeslice")
    _delete_pool(kube, "re-sample")
    eventually(lambda: kube.get_or_none(f"{SP}/re-sample-timeslice") is None, GONE, "policy gone")
    _nodes(kube, "re-sample")
    kube.create(NPG, npg)
    kube.create(SP, policy)
    _converged(kube, "re-sample", 2, "3g.40gb")
    eventually(lambda: _policy_ready(kube, "re-sample-timeslice"), DEADLINE, "policy Ready")


def test_nodes_replaced_mid_rollout_under_their_names_converge(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    """(e) A node's MIG manager hangs mid-rollout; the machine is replaced, keeping its name
    (and its pool's label): the new Node is rolled out, nothing waits on the one that went."""
    specs = fleet.pool("re-stuck", "H100-80GB", 2)
    stuck = [fleet.node_manifest(spec) for spec in specs]
    for manifest in stuck:
        manifest["metadata"]["annotations"][gpunode.STUCK] = "true"
    names = fleet.create_from_manifests(kube, stuck)
    _create_pool(kube, "re-stuck", LAYOUT_B)
    eventually(
        lambda: _observed(kube, "re-stuck") == "WaitingForAgent", DEADLINE, "WaitingForAgent"
    )
    _delete_nodes(kube, names)
    assert fleet.create_nodes(kube, specs) == names
    _converged(kube, "re-stuck", 2, "1g.10gb")
