"""The vGPU Device Manager's config file, parsed as strictly as the real one parses it.

``version: v1`` and ``vgpu-configs`` only; per entry ``device-filter`` (string or list),
``devices`` (``all`` or GPU indices) and ``vgpu-devices`` (type -> count), nothing else; each
type in one of the two grammars, counts above zero, time-sliced and MIG-backed never in one map.
The messages are the device manager's own (vgpu.md §1.1). It does *not* check that a type
exists on the board or that the count fits: that fails on the node (``vgpumanager``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

TIME_SLICED = re.compile(r"^(?P<GPU>[A-Z0-9]+(-([a-zA-Z]+))*)-(?P<GB>0|[1-9][0-9]*)(?P<S>A|B|C|Q)$")
MIG_BACKED = re.compile(
    r"^(?P<GPU>[A-Z0-9]+)-(?P<G>[1-9])-(?P<GB>0|[1-9][0-9]*)(?P<S>A|B|C|Q)"
    r"(?P<ATTR>(ME|NOME|MEALL|GFX))?$"
)
_TOP_KEYS = ("version", "vgpu-configs")
_SPEC_KEYS = ("device-filter", "devices", "vgpu-devices")
MIXING = "cannot mix time-sliced and MIG-backed vGPU devices on the same GPU"


class VgpuError(ValueError):
    """The vGPU Device Manager would refuse this (the message is its own)."""


@dataclass(frozen=True)
class VgpuType:
    gpu: str
    g: int  # GPU instances of a MIG-backed type; 0: time-sliced
    gb: int
    series: str
    attr: str = ""

    @property
    def mig(self) -> bool:
        return self.g > 0


@dataclass(frozen=True)
class Spec:
    """One entry of a config: which GPUs (filter, indices) get which vGPU devices."""

    device_filter: tuple[int, ...]  # 0x<device><vendor> numbers; empty: every GPU
    devices: str | tuple[int, ...]  # "all" or indices
    vgpu_devices: Mapping[str, int]

    def matches(self, index: int, device_id: int) -> bool:
        if self.device_filter and device_id not in self.device_filter:
            return False
        return self.devices == "all" or index in self.devices


def parse_type(name: str) -> VgpuType:
    """A type name in either grammar, or VgpuError ``malformed vGPU type string``."""
    found = TIME_SLICED.match(name) or MIG_BACKED.match(name)
    if not name or found is None:
        raise VgpuError(f"malformed vGPU type string '{name}'")
    parts = found.groupdict()
    g = int(parts.get("G") or 0)
    return VgpuType(parts["GPU"], g, int(parts["GB"]), parts["S"], parts.get("ATTR") or "")


def config(text: str, name: str) -> list[Spec]:
    """Config ``name`` of the file ``text`` (``assert --valid-config``), or VgpuError."""
    doc = yaml.safe_load(text or "") or {}
    if not isinstance(doc, dict):
        raise VgpuError("unmarshal error: the config file is not a mapping")
    if doc and "version" not in doc:
        raise VgpuError("unable to parse with missing 'version' field")
    for key, value in doc.items():
        if key not in _TOP_KEYS:
            raise VgpuError(f"unexpected field: {key}")
        if key == "version" and value != "v1":
            raise VgpuError(f"unknown version: {value}")
    configs = doc.get("vgpu-configs")
    if "vgpu-configs" in doc and not configs:
        raise VgpuError("at least one entry in 'vgpu-configs' is required")
    parsed = {}
    for cname, specs in (configs or {}).items():
        if not isinstance(specs, list) or not specs:
            raise VgpuError(f"at least one entry in '{cname}' is required")
        parsed[cname] = [_spec(s) for s in specs]
    if name not in parsed:
        raise VgpuError(f"selected vgpu-config not present: {name}")
    return parsed[name]


def _spec(raw: Any) -> Spec:
    if not isinstance(raw, dict):
        raise VgpuError("unmarshal error: an entry is not a mapping")
    for key in ("devices", "vgpu-devices"):
        if key not in raw:
            raise VgpuError(f"missing required field: {key}")
    if extra := [k for k in raw if k not in _SPEC_KEYS]:
        raise VgpuError(f"unexpected field: {extra[0]}")
    return Spec(
        _filter(raw.get("device-filter")), _devices(raw["devices"]), _vgpus(raw["vgpu-devices"])
    )


def _filter(raw: Any) -> tuple[int, ...]:
    items = [raw] if isinstance(raw, str) else raw
    if raw is None or raw == "":
        return ()
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise VgpuError(f"invalid 'device-filter': {raw!r}")
    try:
        return tuple(int(i.split(":")[0], 0) for i in items)  # subsystem ids: not simulated
    except ValueError:
        raise VgpuError(f"unable to create DeviceID from string '{raw}'") from None


def _devices(raw: Any) -> str | tuple[int, ...]:
    if isinstance(raw, str):
        if raw != "all":
            raise VgpuError(f"invalid string input for 'devices': {raw}")
        return raw
    if isinstance(raw, list) and all(type(i) is int for i in raw):
        return tuple(raw)
    raise VgpuError(f"invalid 'devices': {raw!r} (a string or a list of GPU indices)")


def _vgpus(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise VgpuError(f"invalid 'vgpu-devices': {raw!r} (a map of vGPU type to count)")
    where = "error validating values in 'vgpu-devices' field"
    kinds = set()
    for key, count in raw.items():
        try:
            kind = parse_type(str(key))
        except VgpuError as err:
            raise VgpuError(f"{where}: invalid format for '{key}': {err}") from None
        if type(count) is not int:
            raise VgpuError(f"json: cannot unmarshal {count!r} into Go value of type int")
        if count <= 0:
            raise VgpuError(f"{where}: invalid count for '{count}': <nil>")
        kinds.add(kind.mig)
        if len(kinds) > 1:
            raise VgpuError(f"{where}: {MIXING}")
    return {str(k): int(v) for k, v in raw.items()}
