"""Per-device layouts of a pool: which layout each device index gets, and the names of configs.

A pool declares layouts as ``devices: all`` plus optional explicit index lists
that override it (docs/geometry.md §Devices of a layout). MIG and vNPU share it, so the module works
on plain ``(devices, counts)`` pairs and is used by both renderers and both
capacity calculations. Rendered entries never overlap: mig-parted applies every
matching entry and also *asserts* every matching entry, so an ``all`` entry that
an override contradicts would never assert cleanly. When overrides exist, the
``all`` part is therefore written as the explicit complement over the index
range the API allows (0-15); indexes a node lacks match nothing there, which
is mig-parted's behaviour (docs/facts/mig.md §Selecting devices). Devices no layout covers
get the empty layout (MIG disabled / whole NPU), so capacity is never a guess.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tessera.api.v1alpha1 import devices as grammar

Counts = tuple[tuple[str, int], ...]
Devices = int | str  # as the API model types it; tessera.api.v1alpha1.devices parses it
MAX_DEVICES = grammar.MAX_INDEX + 1
_LABEL_MAX = 63  # the config name is a node label value
HASH_LEN = 10


class GeometryError(ValueError):
    """A pool's layouts cannot be rendered or counted; the message is for a person."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One rendered, non-overlapping entry: ``all`` or sorted indexes, and the counts."""

    devices: str | tuple[int, ...]
    counts: Counts


def counts_of(mapping: Mapping[str, int]) -> Counts:
    return tuple(sorted((k, v) for k, v in mapping.items() if v))


def indexes(devices: Devices) -> tuple[int, ...] | None:
    """The explicit indexes of a ``devices`` value, None for ``all`` (the API's one parser)."""
    try:
        return grammar.parse(devices)
    except grammar.DevicesError as err:
        raise GeometryError(str(err)) from err


def overrides(layouts: Sequence[tuple[Devices, Mapping[str, int]]]) -> dict[int, int]:
    """Explicit device index -> position of the layout naming it; raises on a double listing."""
    problem = grammar.shared_message([devices for devices, _ in layouts])
    if problem:
        raise GeometryError(problem)
    owner: dict[int, int] = {}
    for pos, (devices, _) in enumerate(layouts):
        for index in indexes(devices) or ():
            owner[index] = pos
    return owner


def entries(layouts: Sequence[tuple[Devices, Mapping[str, int]]]) -> tuple[Entry, ...]:
    """The canonical, non-overlapping entries for a layout list (see module docstring)."""
    owner = overrides(layouts)
    everywhere: Counts = ()
    for devices, counts in layouts:
        if indexes(devices) is None:
            everywhere = counts_of(counts)
    by_counts: dict[Counts, list[int]] = {}
    for index, pos in owner.items():
        by_counts.setdefault(counts_of(layouts[pos][1]), []).append(index)
    rest = [i for i in range(MAX_DEVICES) if i not in owner]
    if rest:
        by_counts.setdefault(everywhere, []).extend(rest)
    if not owner:
        return (Entry("all", everywhere),)
    return tuple(
        Entry(tuple(sorted(listed)), counts)
        for counts, listed in sorted(by_counts.items(), key=lambda kv: min(kv[1]))
    )


def per_device(
    layouts: Sequence[tuple[Devices, Mapping[str, int]]], device_count: int
) -> tuple[Counts, ...]:
    """The counts each of a node's ``device_count`` devices gets."""
    out: list[Counts] = [()] * device_count
    for entry in entries(layouts):
        targets = range(device_count) if isinstance(entry.devices, str) else entry.devices
        for index in targets:
            if index < device_count:
                out[index] = entry.counts
    return tuple(out)


def config_name(pool: str, payload: object) -> str:
    """``tessera-<pool>-<hash>``: a content hash, because agents never reload an edited key."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(f"{pool}\n{text}".encode()).hexdigest()[:HASH_LEN]
    room = _LABEL_MAX - len("tessera-") - 1 - HASH_LEN
    return f"tessera-{pool[:room].rstrip('-.')}-{digest}"


def index_ranges(values: Sequence[int]) -> str:
    """``0-3, 6`` for people; ``GPU 0`` style prefixes are added by callers."""
    runs: list[tuple[int, int]] = []
    for i in sorted(values):
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def counts_text(counts: Iterable[tuple[str, int]], whole: str = "whole GPU") -> str:
    """One device's slices for people, ``3g.40gb + 2x1g.10gb``; ``whole`` when it has none
    (MIG or vNPU disabled)."""
    listed = [f"{n}x{p}" if n > 1 else str(p) for p, n in counts]
    return " + ".join(listed) or whole
