"""What the pool's nodes publish as devices of the driver ``gpu.nvidia.com`` (ResourceSlices).

The driver publishes one pool per node (``spec.pool.name``) in one or more slices; consumers
read only the highest ``generation`` of each pool, and only once all its
``resourceSliceCount`` slices are published (``complete``; see docs/dra.md §Device counts).
``selected`` counts, per class, what its selector selects there — a whole GPU
(``type == gpu``) or a MIG device of one profile — and ``without_driver`` names the nodes
that publish nothing yet.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .naming import DRIVER, GPU


def selected(slices: Iterable[Mapping[str, Any]], nodes: Iterable[str]) -> Counter[str]:
    """Devices on ``nodes`` by what a class selects: ``gpu`` or the MIG profile."""
    found: Counter[str] = Counter()
    for spec in complete(slices, nodes):
        for device in spec.get("devices") or []:
            attrs = device.get("attributes") or {}
            kind = _text(attrs, "type")
            if kind == GPU:
                found[GPU] += 1
            elif kind == "mig" and _text(attrs, "profile"):
                found[_text(attrs, "profile")] += 1
    return found


def complete(slices: Iterable[Mapping[str, Any]], nodes: Iterable[str]) -> list[Mapping[str, Any]]:
    """The specs of the driver's slices on ``nodes`` that kube-scheduler would use: of each pool
    its highest ``generation`` only, and only once all ``resourceSliceCount`` slices of that
    generation are published (an incomplete pool is not allocated from)."""
    wanted = set(nodes)
    newest: dict[str, int] = {}
    mine: list[Mapping[str, Any]] = []
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != DRIVER or spec.get("nodeName") not in wanted:
            continue
        pool = spec.get("pool") or {}
        name, generation = str(pool.get("name", "")), int(pool.get("generation", 0))
        newest[name] = max(newest.get(name, generation), generation)
        mine.append(spec)
    current = [s for s in mine if _generation(s) == newest[_pool(s)]]
    seen = Counter(_pool(s) for s in current)
    return [s for s in current if seen[_pool(s)] >= _count(s)]


def _pool(spec: Mapping[str, Any]) -> str:
    return str((spec.get("pool") or {}).get("name", ""))


def _generation(spec: Mapping[str, Any]) -> int:
    return int((spec.get("pool") or {}).get("generation", 0))


def _count(spec: Mapping[str, Any]) -> int:
    return int((spec.get("pool") or {}).get("resourceSliceCount", 1) or 1)


def without_driver(slices: Iterable[Mapping[str, Any]], nodes: Iterable[str]) -> tuple[str, ...]:
    """The nodes (sorted) with no ResourceSlice of the driver."""
    published = {
        (item.get("spec") or {}).get("nodeName")
        for item in slices
        if (item.get("spec") or {}).get("driver") == DRIVER
    }
    return tuple(sorted(set(nodes) - published))


def _text(attrs: Mapping[str, Any], name: str) -> str:
    value = attrs.get(name) or attrs.get(f"{DRIVER}/{name}") or {}
    return str(value.get("string", "")) if isinstance(value, Mapping) else ""
