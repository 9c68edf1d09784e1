"""Parsed specs for the DRA class tests, from the shared builders."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builders import LAYOUT_A, LAYOUT_B
from builders.dra import dra_policy, dra_pool
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.dra import PoolInput

__all__ = ["LAYOUT_A", "LAYOUT_B", "policy", "pool"]


def pool(
    layout: Mapping[str, Any] | None = None,
    gpus: int | None = 8,
    *,
    allocation: str = "DRA",
    time_slicing: bool = False,
    mps: bool = False,
) -> PoolInput:
    built = dra_pool("p", time_slicing=time_slicing, mps=mps)
    if layout:
        built.layout(layout)
    spec = built.obj()["spec"]
    if allocation != "DRA":
        spec.pop("dra")
        spec["allocation"] = allocation
    return PoolInput(NodePoolGeometrySpec.model_validate(spec), gpus)


def policy(pool_name: str, backend: str, **dra: Any) -> SharingPolicySpec:
    spec = dra_policy("s", pool_name, backend, **dra).obj()["spec"]
    return SharingPolicySpec.model_validate(spec)
