"""Raw Nodes and Pods as the API server returns them, for the live demand and the autopilot's
pass: an H100 pool's node with its MIG config labels and GPU agent record, a pod that pends
(kube-scheduler's PodScheduled condition) or runs on a node."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.cluster import objects

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
POOL = "h100"
WHOLE = {"nodeSelector": {"matchLabels": {"tessera.io/pool": POOL}}}


def spec(**over: Any) -> NodePoolGeometrySpec:
    body: dict[str, Any] = {**WHOLE, "mig": {"layouts": [{"devices": "all", "profiles": {}}]}}
    body.update(over)
    return NodePoolGeometrySpec.model_validate(body)


DENSER = spec(mig={"layouts": [{"devices": "all", "profiles": {"1g.10gb": 7}}]})


def config(spec: NodePoolGeometrySpec) -> tuple[str, Any]:
    seen = objects.observe_pool(POOL, spec, [node("probe", config="")], {})
    (target,) = seen.targets.values()
    assert target.config is not None
    return target.config


def node(
    name: str,
    *,
    config: str,
    gpus: int = 8,
    held: dict[str, list[int]] | None = None,
    read: datetime = NOW - timedelta(seconds=30),
    product: str = "NVIDIA-H100-80GB-HBM3",
    pool: str = POOL,
) -> dict[str, Any]:
    labels = {
        "tessera.io/pool": pool,
        c.GPU_PRODUCT_LABEL: product,
        c.GPU_COUNT_LABEL: str(gpus),
    }
    if config:
        labels |= {c.MIG_CONFIG_LABEL: config, c.MIG_CONFIG_STATE_LABEL: "success"}
    annotations = {}
    if held is not None:
        record = {"v": 1, "read": read.strftime("%Y-%m-%dT%H:%M:%SZ"), "pods": held}
        annotations[c.GPU_HOLDERS_ANNOTATION] = json.dumps(record)
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {}},
    }


def pod(
    name: str,
    resource: str = "nvidia.com/mig-1g.10gb",
    n: int = 1,
    *,
    node: str = "",
    pended: timedelta | None = timedelta(minutes=10),
    reason: str = "Unschedulable",
    selector: dict[str, str] | None = None,
    created: datetime = NOW - timedelta(hours=1),
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if not node:
        cond: dict[str, Any] = {"type": "PodScheduled", "status": "False", "reason": reason}
        if pended is not None:
            cond["lastTransitionTime"] = (NOW - pended).strftime("%Y-%m-%dT%H:%M:%SZ")
        status["conditions"] = [cond]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {resource: str(n)}}}],
        "nodeSelector": selector or {},
    }
    if node:
        spec["nodeName"] = node
    meta = {
        "namespace": "ml",
        "name": name,
        "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"metadata": meta, "spec": spec, "status": status}
