"""A pool's layouts as the agent ConfigMaps hold them, and as a reviewer reads them.

``current_configs`` reads the pool's vendor section (mig-parted's ``mig-configs``, the
vNPU agent's ``vnpu-configs``); ``fold`` writes the pool's planned configs into the shared
document with ``pools.configs_document``, as the controller does; ``diff`` shows the result
against the live text; ``describe`` puts one config on one line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.cluster import objects as observe
from tessera.domain.cluster import pools
from tessera.domain.geometry import layouts, vgpu
from tessera.domain.preview.model import Cluster, Locations
from tessera.domain.preview.results import ConfigDiff, unified


def describe(entries: Iterable[Mapping[str, Any]] | None) -> str:
    """A config's entries as one line: ``all: 3g.40gb + 2g.20gb + 2x1g.10gb; 7: whole GPU``;
    vGPU configs as ``all: 2xA100-20C; 1: no vGPU``."""
    if entries is None:
        return "unknown config"
    parts = []
    for entry in entries:
        devices = entry.get("devices", "all")
        where = devices if isinstance(devices, str) else ranges(devices)
        if "vgpu-devices" in entry:
            vgpus = entry.get("vgpu-devices") or {}
            listed = " + ".join(f"{n}x{t}" for t, n in vgpus.items()) if vgpus else "no vGPU"
            parts.append(f"{where}: {listed}")
            continue
        counts = entry.get("mig-devices") or entry.get("vnpu-devices") or {}
        enabled = entry.get("mig-enabled", entry.get("vnpu-enabled", False))
        if not enabled or not counts:
            whole = "whole NPU" if "vnpu-enabled" in entry else "whole GPU"
            parts.append(f"{where}: {whole}")
            continue
        parts.append(f"{where}: {layouts.counts_text(counts.items())}")
    return "; ".join(parts) or "whole devices"


def unlabelled(spec: NodePoolGeometrySpec | None) -> str:
    """What a node without a config label runs: on a vm-vgpu node the vGPU Device Manager has
    applied its default config (``vgpuDeviceManager.config.default``) at start."""
    if spec is not None and pools.is_vgpu(spec):
        return "the device manager's default config"
    return "no layout yet"


def ranges(indexes: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 5]`` as ``0-3,5``."""
    spans: list[list[int]] = []
    for i in sorted(indexes):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)


def _document_of(spec: NodePoolGeometrySpec, loc: Locations) -> tuple[tuple[str, str], str, str]:
    if pools.is_ascend(spec):
        return loc.vnpu, c.VNPU_CONFIGMAP_KEY, "vnpu-configs"
    if pools.is_vgpu(spec):
        return loc.vgpu, c.VGPU_CONFIGMAP_KEY, vgpu.SECTION
    return loc.mig, c.MIG_PARTED_CONFIGMAP_KEY, "mig-configs"


def current_configs(
    before: Cluster, spec: NodePoolGeometrySpec, loc: Locations
) -> dict[str, list[Mapping[str, Any]]]:
    """The agent ConfigMap's configs for this pool's vendor, by name (as the nodes name them)."""
    where, key, section = _document_of(spec, loc)
    text = ((before.configmap(where) or {}).get("data") or {}).get(key, "")
    try:
        doc = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return {}
    return dict((doc or {}).get(section) or {}) if isinstance(doc, dict) else {}


def fold(
    before: Cluster,
    spec: NodePoolGeometrySpec,
    pool: str,
    seen: observe.PoolObservation,
    loc: Locations,
    documents: dict[tuple[str, str], tuple[str, str]],
) -> None:
    """Fold this pool's configs into the (shared) agent ConfigMap text, as the controller would."""
    where, key, section = _document_of(spec, loc)
    if where not in documents:
        live = ((before.configmap(where) or {}).get("data") or {}).get(key, "")
        documents[where] = (key, live)
    wanted, keep = observe.pool_configs(spec, seen)
    text = pools.configs_document(documents[where][1], pool, section, wanted, keep)
    if text is not None:
        documents[where] = (key, text)


def diff(before: Cluster, where: tuple[str, str], key: str, text: str) -> ConfigDiff | None:
    live = ((before.configmap(where) or {}).get("data") or {}).get(key, "")
    return unified(f"{where[0]}/{where[1]} {key}", live, text)
