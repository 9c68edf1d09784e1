"""The simulated MIG manager's decisions: read a mig-parted config, place every GPU's instances.

The config is read as mig-parted does (docs/facts/mig.md §The mig-parted config: ``version: v1``,
``mig-configs``, entries with ``devices`` and ``mig-enabled``, later entries win per GPU) and
each GPU's instances are placed on the model's grid from ``mig_placements.yaml``
(docs/facts/mig.md §Placement rules: each instance at one of its profile's starts, no slot covered
twice, no profile beyond its cap). Nothing here asks Tessera whether a layout is valid.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from devcluster.hardware import Gpu

Entry = Mapping[str, Any]
_TOP_KEYS = {"version", "mig-configs"}
_ENTRY_KEYS = {"devices", "mig-enabled", "mig-devices"}


class MigError(ValueError):
    """The MIG manager would fail to apply this config (the message says why)."""


def config_entries(text: str, name: str) -> list[Entry]:
    """The entries of config ``name`` in mig-parted's ``config.yaml``, or MigError."""
    doc = yaml.safe_load(text or "") or {}
    if not isinstance(doc, dict):
        raise MigError("config.yaml is not a mapping")
    if extra := set(doc) - _TOP_KEYS:
        raise MigError(f"unexpected field: {sorted(extra)[0]}")
    if "version" not in doc:
        raise MigError("unable to parse with missing 'version' field")
    if doc["version"] != "v1":
        raise MigError(f"unknown version: {doc['version']}")
    configs = doc.get("mig-configs") or {}
    if name not in configs:
        raise MigError(f"selected mig-config not present: {name}")
    entries = configs[name]
    if not isinstance(entries, list) or not entries:
        raise MigError(f"at least one entry in '{name}' is required")
    for entry in entries:
        _check_entry(entry)
    return entries


def _check_entry(entry: Any) -> None:
    if not isinstance(entry, dict):
        raise MigError("an entry is not a mapping")
    if extra := set(entry) - _ENTRY_KEYS:  # device-filter needs PCI ids: not simulated
        raise MigError(f"unexpected field: {sorted(extra)[0]}")
    for key in ("devices", "mig-enabled"):
        if key not in entry:
            raise MigError(f"missing required field: {key}")
    devices = entry["devices"]
    if isinstance(devices, str) and devices != "all":
        raise MigError(f"invalid string input for 'devices': {devices}")
    if not isinstance(devices, str) and not (
        isinstance(devices, list) and all(type(i) is int for i in devices)
    ):
        raise MigError(f"invalid 'devices': {devices!r}")
    if entry["mig-enabled"] and "mig-devices" not in entry:
        raise MigError("missing required field 'mig-devices' when 'mig-enabled' is true")
    if not entry["mig-enabled"] and entry.get("mig-devices"):
        raise MigError("MIG devices included when 'mig-enabled' is false")
    for profile, count in (entry.get("mig-devices") or {}).items():
        if type(count) is not int or count < 0:
            raise MigError(f"invalid count for {profile}: {count!r}")


def layouts(gpu_count: int, entries: Sequence[Entry]) -> list[dict[str, int] | None]:
    """Each GPU's MIG instances once ``entries`` are applied (later entries win); None: MIG off."""
    out: list[dict[str, int] | None] = [None] * gpu_count
    for entry in entries:
        devices = entry["devices"]
        chosen = range(gpu_count) if devices == "all" else [i for i in devices if i < gpu_count]
        for i in chosen:
            out[i] = dict(entry.get("mig-devices") or {}) if entry["mig-enabled"] else None
    return out


def resources(gpu: Gpu, gpu_count: int, entries: Sequence[Entry], strategy: str) -> dict[str, int]:
    """What the device plugin advertises once ``entries`` are applied to this node's GPUs."""
    out: dict[str, int] = {}
    for i, layout in enumerate(layouts(gpu_count, entries)):
        if layout is None:
            out["nvidia.com/gpu"] = out.get("nvidia.com/gpu", 0) + 1
            continue
        why = problem(gpu, layout)
        if why:
            raise MigError(f"GPU {i}: {why}")
        for profile, count in layout.items():
            key = "nvidia.com/gpu" if strategy == "single" else f"nvidia.com/mig-{profile}"
            if count:
                out[key] = out.get(key, 0) + count
    return out


def problem(gpu: Gpu, layout: Mapping[str, int]) -> str | None:
    """Why one GPU of this model cannot hold ``layout``; None when it can."""
    wanted = {name: count for name, count in layout.items() if count}
    for name, count in sorted(wanted.items()):
        profile = gpu.profiles.get(name)
        if profile is None:
            return f"{gpu.model} has no MIG profile {name}"
        if count > profile.max:
            return f"{count}x {name}: at most {profile.max} per GPU on {gpu.model}"
    if (total := sum(wanted.values())) > gpu.max_instances:
        return f"{total} GPU instances: at most {gpu.max_instances} on {gpu.model}"
    if sum(c for n, c in wanted.items() if n in gpu.one_per_gpu) > 1:
        return f"more than one media-extension instance ({', '.join(sorted(gpu.one_per_gpu))})"
    if placement(gpu, wanted) is None:
        shown = ", ".join(f"{c}x {n}" for n, c in sorted(wanted.items()))
        return f"{shown} do not fit side by side on the {gpu.slots} slots of {gpu.model}"
    return None


def placement(gpu: Gpu, layout: Mapping[str, int]) -> dict[str, tuple[int, ...]] | None:
    """Start slots for every instance of ``layout`` with no slot covered twice, or None."""
    order = sorted(layout.items(), key=lambda nc: (-gpu.profiles[nc[0]].size, nc[0]))

    def fill(i: int, covered: frozenset[int]) -> dict[str, tuple[int, ...]] | None:
        if i == len(order):
            return {}
        name, count = order[i]
        profile = gpu.profiles[name]
        for starts in itertools.combinations(profile.starts, count):
            slots = [s + k for s in starts for k in range(profile.size)]
            if len(set(slots)) < len(slots) or covered.intersection(slots):
                continue
            rest = fill(i + 1, covered | set(slots))
            if rest is not None:
                return {name: starts, **rest}
        return None

    return fill(0, frozenset())
