"""The map Volcano's ``deviceshare.KnownGeometriesCM*`` points at: Tessera's own ConfigMap.

Volcano reads one ``device-config.yaml`` for both HAMi features it schedules: the ``vnpus``
section (``AscendHAMiVNPUEnable``) and the ``nvidia`` section (``VGPUEnable``), so when both
are used they are merged into that one file, as Volcano's docs require. Volcano parses the
file with its own types, which differ from HAMi's (docs/facts/volcano.md §Known geometries map):

- ``vnpus`` is a list up to v1.15; from v1.16 the wrapper ``{hamiVnpuCore, configs}`` (the
  list is still read, but only the wrapper carries ``hamiVnpuCore``). A wrapper given to
  v1.15 fails to parse and Volcano silently falls back to a 310P-only default.
- A chip entry keeps only the keys Volcano reads (``VOLCANO_VNPU_KEYS``); HAMi's
  ``resourceCoreName``, ``memoryFactor``, ``runtimeClassName``, ``overwriteEnv`` and
  ``superPod`` are not read by Volcano and are left out rather than looking effective.
- The ``nvidia`` section uses Volcano's keys (``gpuMemoryFactor``, not ``memoryFactor``).

Tessera owns the whole map (default ``tessera-volcano-device-config`` in Volcano's
namespace), so it is written whole; nobody else's lines live there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from tessera.domain.schedulers.traps import WRAPPER_SINCE
from tessera.domain.schedulers.versions import Version

NAME = "tessera-volcano-device-config"
KEY = "device-config.yaml"
VOLCANO_VNPU_KEYS = (
    "chipName",
    "commonWord",
    "resourceName",
    "resourceMemoryName",
    "memoryAllocatable",
    "memoryCapacity",
    "aiCore",
    "aiCPU",
    "templates",
)
TEMPLATE_KEYS = ("name", "memory", "aiCore", "aiCPU")
VOLCANO_NVIDIA_KEYS = (
    "resourceCountName",
    "resourceMemoryName",
    "resourceCoreName",
    "resourceMemoryPercentageName",
    "resourcePriorityName",
    "overwriteEnv",
    "defaultMemory",
    "defaultCores",
    "defaultGPUNum",
    "deviceSplitCount",
    "deviceMemoryScaling",
    "deviceCoreScaling",
    "disableCoreLimit",
    "knownMigGeometries",
    "gpuMemoryFactor",
)
# Volcano's vGPU resource names (how_to_use_volcano_vgpu.md) and HAMi's defaults for the rest.
NVIDIA_DEFAULTS: Mapping[str, Any] = {
    "resourceCountName": "volcano.sh/vgpu-number",
    "resourceMemoryName": "volcano.sh/vgpu-memory",
    "resourceMemoryPercentageName": "volcano.sh/vgpu-memory-percentage",
    "resourceCoreName": "volcano.sh/vgpu-cores",
    "overwriteEnv": False,
    "defaultMemory": 0,
    "defaultCores": 0,
    "defaultGPUNum": 1,
    "deviceSplitCount": 10,
    "deviceMemoryScaling": 1,
    "deviceCoreScaling": 1,
    "gpuMemoryFactor": 1,
}


def volcano_chip(config: Mapping[str, Any]) -> dict[str, Any]:
    """One HAMi ``vnpus`` chip entry with only the keys Volcano reads."""
    out = {k: config[k] for k in VOLCANO_VNPU_KEYS if k in config and k != "templates"}
    if "templates" in config:
        out["templates"] = [
            {k: t[k] for k in TEMPLATE_KEYS if k in t} for t in config.get("templates") or []
        ]
    return out


def nvidia_section(scalings: Mapping[str, Any]) -> dict[str, Any]:
    """Volcano's ``nvidia`` section: its defaults with ``scalings`` (Volcano's key names;
    a HAMi ``memoryFactor`` is renamed ``gpuMemoryFactor``) over them."""
    given = dict(scalings)
    if "memoryFactor" in given:
        given.setdefault("gpuMemoryFactor", given.pop("memoryFactor"))
    merged = {**NVIDIA_DEFAULTS, **given}
    return {k: merged[k] for k in VOLCANO_NVIDIA_KEYS if k in merged}


def document(
    version: Version,
    chips: Sequence[Mapping[str, Any]] = (),
    *,
    hami_vnpu_core: bool = False,
    nvidia: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``device-config.yaml`` Volcano ``version`` reads: ``nvidia`` when given (VGPUEnable),
    ``vnpus`` when chips are (AscendHAMiVNPUEnable) — in the shape that version parses."""
    doc: dict[str, Any] = {}
    if nvidia is not None:
        doc["nvidia"] = nvidia_section(nvidia)
    if chips:
        configs = [volcano_chip(c) for c in sorted(chips, key=lambda c: str(c.get("chipName")))]
        if version >= WRAPPER_SINCE:
            doc["vnpus"] = {"hamiVnpuCore": hami_vnpu_core, "configs": configs}
        else:
            doc["vnpus"] = configs
    return doc


def render(doc: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False)


def configmap(namespace: str, doc: Mapping[str, Any], name: str = NAME) -> dict[str, Any]:
    """The ConfigMap Tessera writes (labels mark it Tessera's)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "tessera"},
        },
        "data": {KEY: render(doc)},
    }
