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
