"""Raw objects for preview tests: simulated nodes, pods, PDBs and Tessera manifests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tessera.api import constants as c
from tessera.devcluster import fleet
from tessera.domain import cluster, pools
from tessera.domain.preview import Cluster, Raw

T0 = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)
LAYOUT_A = {"mig": {"layouts": [{"profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]}}
LAYOUT_B = {"mig": {"layouts": [{"profiles": {"1g.10gb": 7}}]}}


def npg(name: str, layout: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    return manifest(
        "NodePoolGeometry",
        name,
        {"nodeSelector": {"matchLabels": {c.POOL_LABEL: name}}, **layout, "rollout": rollout},
    )


def manifest(kind: str, name: str, spec: dict[str, Any], **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": c.API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def gpu_nodes(pool: str, count: int, model: str = "H100-80GB", devices: int = 8) -> list[Raw]:
    return [fleet.node_manifest(s) for s in fleet.pool(pool, model, count, devices)]


def converged(nodes: list[Raw], pool_manifest: dict[str, Any]) -> tuple[list[Raw], Raw]:
    """The nodes as the agents leave them once the pool's layout is live, and the ConfigMap."""
    from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec

    name = pool_manifest["metadata"]["name"]
    spec = NodePoolGeometrySpec.model_validate(pool_manifest["spec"])
    seen = cluster.observe_pool(name, spec, nodes, {})
    out = []
    for node in nodes:
        target = seen.targets[node["metadata"]["name"]]
        assert target.config is not None
        labels = {
            **node["metadata"]["labels"],
            c.MIG_CONFIG_LABEL: target.config[0],
            c.MIG_CONFIG_STATE_LABEL: "success",
        }
        alloc = {"cpu": "64", "pods": "110", **{k: str(v) for k, v in target.capacity.items()}}
        out.append(
            {
                **node,
                "metadata": {**node["metadata"], "labels": labels},
                "status": {**node["status"], "allocatable": alloc},
            }
        )
    wanted, keep = cluster.pool_configs(spec, seen)
    text = pools.configs_document("", name, "mig-configs", wanted, keep)
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": c.MIG_PARTED_CONFIGMAP_NAME, "namespace": "gpu-operator"},
        "data": {c.MIG_PARTED_CONFIGMAP_KEY: text},
    }
    return out, cm


def pod(name: str, node: str, ns: str = "ml", **labels: str) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def pdb(name: str, allowed: int, ns: str = "ml", **match: str) -> Raw:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": ns, "generation": 1},
        "spec": {"selector": {"matchLabels": match}},
        "status": {"observedGeneration": 1, "disruptionsAllowed": allowed},
    }


def namespace(name: str, **labels: str) -> Raw:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def world(*items: Raw) -> Cluster:
    return Cluster.of(items)
