"""The sharing backends and the Ascend sharing modes: one table each, every rule drawn from it.

A row says all Tessera knows of a value: the spec block that configures it, how the node side
names it, whether NVIDIA's DRA driver shares by it and which pool kinds may use it. The CRD's
CEL rules (``sharingpolicy``), ``tessera plan``'s copy of them (``rules``) and the outcome
mapping of ``tessera.domain.sharing`` are generated from these rows, so a new value is a row,
the modules that act on it, tests and docs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

PoolKind = Literal["DevicePlugin", "DRA"]  # a NodePoolGeometry's allocation

Backend = Literal["Exclusive", "TimeSlicing", "MPS", "HAMiCore"]
"""A SharingPolicy's ``spec.backend`` (the type pydantic and mypy read; ``BACKENDS`` its rows)."""


@dataclass(frozen=True)
class BackendRow:
    block: str  # the spec block configuring it ("" for none): spec.<block>, spec.dra.<block>
    node: str  # how a node's running config names it (the device plugin's strategy, HAMi's)
    dra: bool  # NVIDIA's DRA driver shares by it (spec.dra.<block> in the DeviceClass config)
    pools: tuple[PoolKind, ...]  # the pool kinds a policy of this backend may govern
    says: str  # what it is, for people


BACKENDS: Mapping[Backend, BackendRow] = {
    # Each pod gets whole devices: the device plugin's strategy "none", the DRA driver's default.
    "Exclusive": BackendRow("", "exclusive", True, ("DevicePlugin", "DRA"), "whole devices"),
    # Replicas of a device take turns: NVIDIA's time-slicing, or the DRA driver's interval.
    "TimeSlicing": BackendRow(
        "timeSlicing", "time-slicing", True, ("DevicePlugin", "DRA"), "time-sliced replicas"
    ),
    # CUDA MPS: the device plugin's MPS daemon, or the DRA driver's MPS control daemon.
    "MPS": BackendRow("mps", "mps", True, ("DevicePlugin", "DRA"), "CUDA MPS clients"),
    # HAMi-core's memory and compute limits, through HAMi's device plugin; no DRA form.
    "HAMiCore": BackendRow("hamiCore", "hami-core", False, ("DevicePlugin",), "HAMi-core slices"),
}


def blocks() -> tuple[tuple[str, Backend], ...]:
    """``(spec block, backend)`` for every backend configured by a block of its own."""
    return tuple((row.block, name) for name, row in BACKENDS.items() if row.block)


def dra_blocks() -> tuple[tuple[str, Backend], ...]:
    """``(spec.dra block, backend)`` for every backend NVIDIA's DRA driver configures."""
    return tuple((row.block, name) for name, row in BACKENDS.items() if row.block and row.dra)


def not_dra() -> tuple[Backend, ...]:
    """The backends that have no DRA form."""
    return tuple(name for name, row in BACKENDS.items() if not row.dra)


def block_of(backend: str) -> str:
    """The spec block of ``backend`` ("" when it has none or is not a backend)."""
    return next((row.block for name, row in BACKENDS.items() if name == backend), "")


AscendMode = Literal["Templates", "HAMiCore", "MindCluster", "VCannRT"]
"""How a SharingPolicy shares matching Ascend NPUs (``spec.ascend.mode``); ``ASCEND_MODES``
its rows."""

ServedAscendMode = Literal["Templates", "HAMiCore", "MindCluster", "VCannRT"]
"""The modes Tessera reconciles: the CRD's enum (a mode not served yet is refused there)."""


@dataclass(frozen=True)
class AscendModeRow:
    served: bool  # Tessera reconciles it (then it is in ServedAscendMode)
    soft: bool  # HAMi's hamiVnpuCore: HAMi-core slices an NPU below its templates
    says: str
    hami: bool = True  # HAMi's device plugin serves it (its node config, hamiVnpuCore)


ASCEND_MODES: Mapping[AscendMode, AscendModeRow] = {
    # The driver's vir* templates, each allocated whole (HAMi's template mode, Volcano's hami).
    "Templates": AscendModeRow(True, False, "vir* templates"),
    # HAMi's hami-vnpu-core soft slicing: the old spec.ascend.softSlicing: true.
    "HAMiCore": AscendModeRow(True, True, "HAMi-core soft slicing"),
    # Volcano's MindCluster dynamic vNPU on the 310P family: Huawei's device plugin creates
    # vNPUs per pod (presetVirtualDevice false), Volcano's deviceshare picks the template.
    "MindCluster": AscendModeRow(True, False, "Volcano MindCluster dynamic vNPU", hami=False),
    # Huawei's vCANN-RT soft slicing on Atlas 300I A2 / 800I A2 (910B4): Tessera's Ascend agent
    # switches each NPU into device-share mode, Huawei's device plugin (shareDevCount 100) and
    # its Volcano plugin (chip1-softShareDev) share it by AI-core percent and HBM MB.
    "VCannRT": AscendModeRow(True, False, "vCANN-RT soft slicing", hami=False),
}
