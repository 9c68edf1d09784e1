"""What the pool's nodes publish as devices of the driver ``gpu.nvidia.com`` (ResourceSlices).

The driver publishes one pool per node (``spec.pool.name``) in one or more slices; consumers
read only the highest ``generation`` of each pool, and only once all its
``resourceSliceCount`` slices are published (see docs/dra.md §Device counts). A device is of
the kind a class selects: a whole GPU (``type == gpu``) or a MIG device of one profile
(``device_kind``). ``selected`` counts, per kind, the devices of complete pools on some nodes
(the classes' ``status.deviceClasses``); ``slice_pools`` gives each node's pool as a rollout
verifies it (its counts only when complete, as the scheduler reads them, and each device's
kind); ``without_driver`` names the nodes that publish nothing yet.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tessera.domain.dra.naming import DRIVER, GPU

Raw = Mapping[str, Any]
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
"""The standard attribute NVIDIA's driver publishes on every GPU and MIG device (a MIG
device its parent's: ``cmd/gpu-kubelet-plugin/deviceinfo.go``, ``mig.go``, v0.4.1)."""


def device_kind(device: Raw) -> str | None:
    """``gpu``, a MIG profile, or None for a device of another type (or none)."""
    kind = _text(device.get("attributes") or {}, "type")
    if kind == GPU:
        return GPU
    return (_text(device.get("attributes") or {}, "profile") or None) if kind == "mig" else None


def _newest(slices: Iterable[Raw], nodes: set[str] | None) -> dict[str, list[Raw]]:
    """Pool name → the specs of its slices of the driver at the pool's highest generation
    (only slices on ``nodes``, when given)."""
    by_pool: dict[str, list[Raw]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        name = str((spec.get("pool") or {}).get("name", ""))
        if spec.get("driver") != DRIVER or not name:
            continue
        if nodes is not None and spec.get("nodeName") not in nodes:
            continue
        by_pool.setdefault(name, []).append(spec)
    out = {}
    for name, specs in by_pool.items():
        top = max(_generation(s) for s in specs)
        out[name] = [s for s in specs if _generation(s) == top]
    return out


def selected(slices: Iterable[Raw], nodes: Iterable[str]) -> Counter[str]:
    """Devices on ``nodes`` by what a class selects: ``gpu`` or the MIG profile; a pool
    whose newest generation is incomplete is not allocated from, so it counts nothing."""
    found: Counter[str] = Counter()
    for specs in _newest(slices, set(nodes)).values():
        if not _complete(specs):
            continue
        for spec in specs:
            for device in spec.get("devices") or []:
                kind = device_kind(device)
                if kind is not None:
                    found[kind] += 1
    return found


@dataclass(frozen=True)
class SlicePool:
    """One node's pool: device counts by kind (None: incomplete) and each device's kind."""

    devices: dict[str, int] | None = None
    kinds: dict[str, str] = field(default_factory=dict)
    buses: dict[str, str] = field(default_factory=dict)
    """Each device's GPU as the driver names it: ``resource.kubernetes.io/pciBusID``, which a
    MIG device carries as its parent's; a device without one is not listed."""


def slice_pools(slices: Iterable[Raw]) -> dict[str, SlicePool]:
    """Pool name (the node) → its devices, when its newest generation is complete
    (``resourceSliceCount`` slices), and every device's kind either way."""
    out = {}
    for name, current in _newest(slices, None).items():
        kinds = {
            str(d.get("name")): kind
            for s in current
            for d in s.get("devices") or []
            if (kind := device_kind(d)) is not None
        }
        buses = {
            str(d.get("name")): bus
            for s in current
            for d in s.get("devices") or []
            if (bus := _text(d.get("attributes") or {}, PCI_BUS_ID, qualified=True))
        }
        counts = Counter(kinds.values())
        devices = dict(sorted(counts.items())) if _complete(current) else None
        out[name] = SlicePool(devices, kinds, buses)
    return out


def without_driver(slices: Iterable[Raw], nodes: Iterable[str]) -> tuple[str, ...]:
    """The nodes (sorted) with no ResourceSlice of the driver."""
    published = {
        (item.get("spec") or {}).get("nodeName")
        for item in slices
        if (item.get("spec") or {}).get("driver") == DRIVER
    }
    return tuple(sorted(set(nodes) - published))


def _complete(specs: list[Raw]) -> bool:
    """All ``resourceSliceCount`` slices of the generation are published."""
    wanted = max(int((s.get("pool") or {}).get("resourceSliceCount", 1) or 1) for s in specs)
    return len(specs) >= wanted


def _generation(spec: Raw) -> int:
    return int((spec.get("pool") or {}).get("generation", 0))


def _text(attrs: Mapping[str, Any], name: str, qualified: bool = False) -> str:
    """A string attribute; an unqualified ``name`` is the driver's (also when written out)."""
    value = attrs.get(name) or (None if qualified else attrs.get(f"{DRIVER}/{name}")) or {}
    return str(value.get("string", "")) if isinstance(value, Mapping) else ""
