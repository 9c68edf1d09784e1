"""Builders and the golden-file check shared by the sharing tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from builders import SharingPolicyWrapper
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.sharing import nodes
from tessera.domain.sharing.assignment import Policy

GOLDEN = Path(__file__).parent / "golden"
POOL = "tessera.io/pool"


def policy(name: str, backend: str = "TimeSlicing", pool: str = "a", **spec: Any) -> Policy:
    """A policy selecting ``tessera.io/pool=<pool>``; ``spec`` uses the wire (camelCase) names."""
    built = SharingPolicyWrapper(name).pool(pool).backend(backend)
    defaults = {"TimeSlicing": ("timeSlicing", {"replicas": 4}), "MPS": ("mps", {"replicas": 4})}
    defaults["HAMiCore"] = ("hamiCore", {})
    if backend in defaults and defaults[backend][0] not in spec:
        block, value = defaults[backend]
        built.spec(**{block: value})
    return Policy(name, SharingPolicySpec.model_validate(built.spec(**spec).obj()["spec"]))


def gpu_node(
    name: str,
    pool: str = "a",
    gpus: int = 8,
    *,
    config: str | None = None,
    applied: str | None = None,
    labels: dict[str, str] | None = None,
) -> nodes.NodeFacts:
    all_labels = {POOL: pool, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    all_labels["nvidia.com/gpu.count"] = str(gpus)
    all_labels.update(labels or {})
    if config is not None:
        all_labels["nvidia.com/device-plugin.config"] = config
    notes = {"tessera.io/device-plugin-config": applied} if applied is not None else {}
    return nodes.from_node(name, all_labels, notes)


def npu_node(
    name: str, pool: str = "a", npus: int = 4, *, labels: dict[str, str] | None = None
) -> nodes.NodeFacts:
    all_labels = {POOL: pool, "ascend": "on", "node.kubernetes.io/npu.chip.name": "310P3"}
    all_labels.update(labels or {})
    return nodes.from_node(name, all_labels, npus=npus, npu_resource="huawei.com/Ascend310P")


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` with golden/<name>; TESSERA_UPDATE_GOLDEN=1 rewrites the file."""
    path = GOLDEN / name
    if os.environ.get("TESSERA_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with TESSERA_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from its golden file"
