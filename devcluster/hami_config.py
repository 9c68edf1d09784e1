"""What HAMi's device plugins read of ``kube-system/hami-scheduler-device`` (``device-config.yaml``).

Both simulated HAMi plugins mount this map as their ``--config-file``/``--config_file``, as the
chart and ADP's manifest do (hami_ascend.md §1.1, §2.2). Read here as the plugins read it
(``gopkg.in/yaml.v2``, not strict: unknown keys ignored), never through Tessera's code:

* ``nvidia:`` — the NVIDIA plugin's defaults under the per-node ``config.json`` entries
  (``deviceSplitCount``, ``deviceMemoryScaling``, ``deviceCoreScaling``, ``migProfileAllowlist``);
* ``vnpus:`` — the Ascend chips' entries and the global soft-slicing default, in both shapes:
  a list (HAMi ≤ v2.8: no ``hamiVnpuCore``, so soft slicing is off unless a node says so) or
  ``{hamiVnpuCore, configs}`` (≥ v2.9).

``None`` from :func:`document` means no map (a plugin whose ConfigMap volume is missing does not
start); :class:`ConfigError` means a map the plugin cannot parse (it exits at start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

NAMESPACE, NAME, KEY = "kube-system", "hami-scheduler-device", "device-config.yaml"
# The chart's rendered nvidia defaults (hami_ascend.md §1.2), used where the map leaves a key out.
SPLIT, MEMORY_SCALING, CORE_SCALING = 10, 1.0, 1.0


class ConfigError(ValueError):
    """``device-config.yaml`` as the plugin would refuse it (it exits; nothing registers)."""


@dataclass(frozen=True)
class NvidiaDefaults:
    split: int = SPLIT
    memory_scaling: float = MEMORY_SCALING
    core_scaling: float = CORE_SCALING
    mig_allowlist: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()  # (models, profiles)


@dataclass(frozen=True)
class Chip:
    """One ``vnpus`` entry, the fields ADP uses to register (memory in MB)."""

    chip_name: str
    common_word: str
    memory_allocatable: int
    smallest_template: int
    ai_core: int

    @property
    def default_slots(self) -> int:
        return self.memory_allocatable // self.smallest_template if self.smallest_template else 1


@dataclass(frozen=True)
class Vnpus:
    hami_vnpu_core: bool
    chips: Mapping[str, Chip]  # by chipName


def document(cm: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The parsed ``device-config.yaml`` of the map; ``None`` without a map."""
    if cm is None:
        return None
    text = (cm.get("data") or {}).get(KEY)
    if text is None:
        raise ConfigError(f"{NAMESPACE}/{NAME} has no key {KEY}")
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{NAMESPACE}/{NAME} {KEY}: {err}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{NAMESPACE}/{NAME} {KEY}: not a map")
    return doc


def nvidia(doc: Mapping[str, Any]) -> NvidiaDefaults:
    section = doc.get("nvidia") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{KEY}: nvidia is not a map")
    split = section.get("deviceSplitCount", SPLIT)
    if type(split) is not int or split < 0:
        raise ConfigError(f"{KEY}: nvidia.deviceSplitCount {split!r} is not an unsigned integer")
    allow = []
    for item in section.get("migProfileAllowlist") or []:
        models, profiles = (item or {}).get("models") or [], (item or {}).get("profiles") or []
        allow.append((tuple(map(str, models)), tuple(map(str, profiles))))
    return NvidiaDefaults(
        split,
        _float(section, "deviceMemoryScaling", MEMORY_SCALING),
        _float(section, "deviceCoreScaling", CORE_SCALING),
        tuple(allow),
    )


def vnpus(doc: Mapping[str, Any]) -> Vnpus:
    """Both shapes: the list (≤ v2.8, soft slicing off by default) or the wrapper (≥ v2.9)."""
    raw = doc.get("vnpus")
    if raw is None:
        return Vnpus(False, {})
    if isinstance(raw, list):
        core, configs = False, raw
    elif isinstance(raw, dict):
        core, configs = raw.get("hamiVnpuCore", False), raw.get("configs") or []
        if not isinstance(core, bool) or not isinstance(configs, list):
            raise ConfigError(f"{KEY}: vnpus must be {{hamiVnpuCore: bool, configs: [...]}}")
    else:
        raise ConfigError(f"{KEY}: vnpus is neither a list nor a map")
    chips = {}
    for entry in configs:
        if not isinstance(entry, dict) or "chipName" not in entry:
            raise ConfigError(f"{KEY}: a vnpus entry without chipName: {entry!r}")
        memories = [int(t.get("memory", 0)) for t in entry.get("templates") or []]
        chip = Chip(
            str(entry["chipName"]),
            str(entry.get("commonWord", "")),
            int(entry.get("memoryAllocatable", 0)),
            min(memories, default=0),
            int(entry.get("aiCore", 0)),
        )
        chips[chip.chip_name] = chip
    return Vnpus(core, chips)


def _float(section: Mapping[str, Any], key: str, default: float) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{KEY}: nvidia.{key} {value!r} is not a number")
    return float(value)


# What HAMi's scheduler decodes strictly by type (yaml.v2 into its Go structs): the vnpus shape
# of each version and the integer fields of an entry and its templates. Written from HAMi's
# structs (pkg/device/ascend/vnpu.go, the scheduler's Config), not from Tessera's table.
_MAP_FORM_FROM = (2, 9)
_ENTRY_INTS = ("memoryAllocatable", "memoryCapacity", "aiCore", "aiCPU", "memoryFactor")
_TEMPLATE_INTS = ("memory", "aiCore", "aiCPU")


def scheduler_loads(doc: Mapping[str, Any], version: tuple[int, int]) -> None:
    """HAMi ``version``'s scheduler start-up read of the file; ConfigError where it exits."""
    raw = doc.get("vnpus")
    if raw is None:
        return
    if (version >= _MAP_FORM_FROM) != isinstance(raw, dict):
        wants = "{hamiVnpuCore, configs}" if version >= _MAP_FORM_FROM else "a list"
        raise ConfigError(f"{KEY}: HAMi v{version[0]}.{version[1]} reads vnpus as {wants}")
    entries = raw.get("configs") if isinstance(raw, dict) else raw
    for entry in entries or []:
        if not isinstance(entry, dict):
            raise ConfigError(f"{KEY}: a vnpus entry is not a map: {entry!r}")
        _ints(entry, _ENTRY_INTS, str(entry.get("chipName")))
        for template in entry.get("templates") or []:
            _ints(template, _TEMPLATE_INTS, f"{entry.get('chipName')} template")


def _ints(item: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    for key in keys:
        value = item.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ConfigError(f"{KEY}: {where}: {key} {value!r} is not a number")
