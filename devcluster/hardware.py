"""The hardware the simulators pretend to be: GPU models and Ascend chips, from their own tables.

``mig_placements.yaml`` and ``npu_chips.yaml`` (next to this module) are the simulator's
copies of NVIDIA's and Huawei's published tables; nothing here reads Tessera's catalog, so the
simulated MIG manager, device plugins and npu-smi disagree with Tessera exactly where Tessera
is wrong (import-linter forbids ``devcluster`` to import ``tessera.domain``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent


class UnknownHardwareError(KeyError):
    """A GPU model or NPU chip name the simulator's tables do not know."""


@dataclass(frozen=True)
class MigProfile:
    """Where one GPU-instance profile may sit: its start slots, the slots it covers, its cap."""

    starts: tuple[int, ...]
    size: int
    max: int


@dataclass(frozen=True)
class Gpu:
    """One GPU model as the simulated MIG manager and GFD see it."""

    model: str
    product: str  # nvidia.com/gpu.product as GFD writes it
    slots: int
    max_instances: int
    one_per_gpu: frozenset[str]
    profiles: dict[str, MigProfile]


@dataclass(frozen=True)
class NpuTemplate:
    ai_core: int
    resource: str  # the static vNPU type: advertised as huawei.com/<resource>


@dataclass(frozen=True)
class NpuChip:
    """One Ascend chip as the fake npu-smi and the simulated Ascend device plugin see it."""

    chip: str  # DCMI chip name, the value of the npu.chip.name label
    ai_core: int
    whole_resource: str
    templates: dict[str, NpuTemplate]
    device_share: bool = False  # npu-smi set -t device-share works on it (vCANN-RT)


def _read(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((HERE / name).read_text())
    return loaded


@cache
def _gpus() -> dict[str, Gpu]:
    """Every GPU by each name it answers to: the table's key, its names and its product label."""
    out: dict[str, Gpu] = {}
    for model, row in _read("mig_placements.yaml").items():
        gpu = Gpu(
            model=model,
            product=row["product"],
            slots=int(row["slots"]),
            max_instances=int(row["max_instances"]),
            one_per_gpu=frozenset(row.get("one_per_gpu") or ()),
            profiles={
                name: MigProfile(tuple(int(s) for s in p["starts"]), int(p["size"]), int(p["max"]))
                for name, p in row["profiles"].items()
            },
        )
        for name in (model, gpu.product, *(row.get("names") or ())):
            out[name] = gpu
    return out


@cache
def _chips() -> dict[str, NpuChip]:
    out: dict[str, NpuChip] = {}
    for chip_name, row in _read("npu_chips.yaml").items():
        chip = NpuChip(
            chip=str(chip_name),
            ai_core=int(row["ai_core"]),
            whole_resource=row["whole_resource"],
            templates={
                name: NpuTemplate(int(t["ai_core"]), t["resource"])
                for name, t in row["templates"].items()
            },
            device_share=bool(row.get("device_share", False)),
        )
        for name in (chip.chip, *(row.get("names") or ())):
            out[str(name)] = chip
    return out


def gpu(name: str) -> Gpu:
    """The GPU model ``name`` (table key, another name, or GFD product label) stands for."""
    try:
        return _gpus()[name]
    except KeyError:
        raise UnknownHardwareError(f"the simulator knows no GPU model {name!r}") from None


def npu_chip(name: str) -> NpuChip:
    """The Ascend chip ``name`` (DCMI chip name or another name) stands for."""
    try:
        return _chips()[name]
    except KeyError:
        raise UnknownHardwareError(f"the simulator knows no NPU chip {name!r}") from None


def is_npu(name: str) -> bool:
    return name in _chips()


def gpu_models() -> list[Gpu]:
    """Each GPU model once, in the table's order."""
    return list({g.model: g for g in _gpus().values()}.values())
