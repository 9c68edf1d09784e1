"""The mig-parted config a pool's MIG layouts become (GPU Operator MIG manager input).

Tessera never touches a GPU: it writes named configs into the mig-parted
ConfigMap and points a node's ``nvidia.com/mig.config`` label at one. Names are
``tessera-<pool>-<content hash>`` because the manager never notices an edited
config under an old name, and a rollback needs the old one to stay addressable.
One call renders every layout set a pool needs at once (typically the desired
one and the last good one), after checking each against every GPU model in the
pool so an impossible layout never reaches a node. Format: docs/facts/mig.md §The mig-parted config:
``version: v1``, ``mig-configs``, ``devices: all`` or indexes, ``mig-enabled:
false`` (without ``mig-devices``) for an empty layout. ``mig-devices`` lists the
biggest profiles first, the order in which they are created most safely.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from tessera.api.v1alpha1.nodepoolgeometry import MigLayout
from tessera.domain.geometry import placement
from tessera.domain.geometry.catalog import GpuModel
from tessera.domain.geometry.layouts import GeometryError, config_name, entries, indexes

CONFIG_KEY = "config.yaml"
_PROFILE = re.compile(r"^(\d+)g\.(\d+)gb")


@dataclass(frozen=True, slots=True)
class RenderedConfigs:
    """ConfigMap data plus the config name of each layout set, in the order given."""

    data: dict[str, str]
    names: tuple[str, ...]


def mig_entries(layouts: Sequence[MigLayout]) -> list[dict[str, Any]]:
    """The mig-parted entries of one layout set, biggest profiles first in ``mig-devices``."""
    out: list[dict[str, Any]] = []
    for entry in entries([(lay.devices, lay.profiles) for lay in layouts]):
        devices: Any = entry.devices if isinstance(entry.devices, str) else list(entry.devices)
        if not entry.counts:
            out.append({"devices": devices, "mig-enabled": False})
            continue
        counts = sorted(entry.counts, key=lambda nc: (_weight(nc[0]), nc[0]))
        out.append({"devices": devices, "mig-enabled": True, "mig-devices": dict(counts)})
    return out


def layout_of(body: object, gpu_count: int) -> tuple[tuple[tuple[str, int], ...], ...] | None:
    """What each of a node's GPUs runs under one mig-parted config (``mig-configs.<name>``),
    as the (profile, count) pairs ``layouts.per_device`` gives; None when the config does not
    say it plainly: a ``device-filter`` (a GPU model, not an index), entries that overlap, a
    GPU no entry names (mig-parted leaves it as it was), or a shape mig-parted would refuse.
    A person's configs are read the same way as Tessera's."""
    if not isinstance(body, list) or gpu_count <= 0:
        return None
    seen: dict[int, tuple[tuple[str, int], ...]] = {}
    for entry in body:
        if not isinstance(entry, dict) or "device-filter" in entry:
            return None
        devices, enabled = entry.get("devices"), entry.get("mig-enabled")
        if devices == "all":
            listed = list(range(gpu_count))
        elif isinstance(devices, list) and all(type(i) is int and i >= 0 for i in devices):
            listed = [i for i in devices if i < gpu_count]
        else:
            return None
        profiles = entry.get("mig-devices") or {}
        if type(enabled) is not bool or not isinstance(profiles, dict):
            return None
        if not all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in profiles.items()):
            return None
        counts = tuple(sorted((k, v) for k, v in profiles.items() if v)) if enabled else ()
        for index in listed:
            if index in seen:
                return None
            seen[index] = counts
    if set(seen) != set(range(gpu_count)):
        return None
    return tuple(seen[i] for i in range(gpu_count))


def _weight(profile: str) -> tuple[int, int]:
    """Sort key from the name alone (``3g.40gb`` -> memory 40, compute 3), so names hash alike
    whatever models are present."""
    match = _PROFILE.match(profile)
    return (-int(match[2]), -int(match[1])) if match else (0, 0)


def render_mig_parted(
    pool: str, layout_sets: Sequence[Sequence[MigLayout]], models: Iterable[GpuModel]
) -> RenderedConfigs:
    """ConfigMap data with one named config per distinct layout set of ``pool``.

    Raises GeometryError naming the model, devices and reason when a layout set
    is impossible on one of ``models`` (the GPU models present in the pool).
    """
    present = sorted(set(models), key=lambda m: m.id)
    configs: dict[str, list[dict[str, Any]]] = {}
    names: list[str] = []
    for layouts in layout_sets:
        _check(layouts, present)
        body = mig_entries(layouts)
        name = config_name(pool, body)
        configs[name] = body
        names.append(name)
    document = {"version": "v1", "mig-configs": dict(sorted(configs.items()))}
    text = yaml.safe_dump(document, sort_keys=False, default_flow_style=None)
    return RenderedConfigs({CONFIG_KEY: text}, tuple(names))


def _check(layouts: Sequence[MigLayout], models: Sequence[GpuModel]) -> None:
    entries([(lay.devices, lay.profiles) for lay in layouts])  # raises on a double listing
    for layout in layouts:
        for model in models:
            result = placement.place(model, layout.profiles)
            if not result.valid:
                listed = indexes(layout.devices)
                where = "all" if listed is None else list(listed)
                raise GeometryError(f"layout devices: {where} on {model.id}: {result.reason}")
