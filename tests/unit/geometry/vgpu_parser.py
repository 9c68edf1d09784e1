"""A test-side stand-in for the vGPU Device Manager's config parser, from its error messages.

Written from docs/facts/vgpu.md §The config file (the messages of vgpu-device-manager v0.5.0's
``api/spec/v1/spec.go`` and ``pkg/types/vgpu_config.go``), independently of Tessera's
renderer: it shares no code with ``tessera.domain``. ``parse`` returns the first message the
real parser would give, or None for a file it accepts.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

TIME_SLICED = re.compile(r"^[A-Z0-9]+(-([a-zA-Z]+))*-(0|[1-9][0-9]*)(A|B|C|Q)$")
MIG_BACKED = re.compile(r"^[A-Z0-9]+-[1-9]-(0|[1-9][0-9]*)(A|B|C|Q)(ME|NOME|MEALL|GFX)?$")


def parse(text: str) -> str | None:
    doc = yaml.safe_load(text)
    if doc is None:
        return None
    if not isinstance(doc, dict):
        return f"not a map: {type(doc).__name__}"
    if "version" not in doc and doc:
        return "unable to parse with missing 'version' field"
    for key, value in doc.items():
        if key == "version":
            if value != "v1":
                return f"unknown version: {value}"
        elif key == "vgpu-configs":
            problem = _configs(value)
            if problem:
                return problem
        else:
            return f"unexpected field: {key}"
    return None


def _configs(configs: Any) -> str | None:
    if not isinstance(configs, dict) or len(configs) == 0:
        return "at least one entry in 'vgpu-configs' is required"
    for name, specs in configs.items():
        if not isinstance(specs, list) or len(specs) == 0:
            return f"at least one entry in '{name}' is required"
        for spec in specs:
            problem = _spec(spec)
            if problem:
                return problem
    return None


def _spec(spec: Any) -> str | None:
    if not isinstance(spec, dict):
        return f"not a map: {spec!r}"
    for required in ("devices", "vgpu-devices"):
        if required not in spec:
            return f"missing required field: {required}"
    for key, value in spec.items():
        if key == "device-filter":
            if not isinstance(value, str) and not (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
            ):
                return f"bad device-filter: {value!r}"
        elif key == "devices":
            if isinstance(value, str):
                if value != "all":
                    return f"invalid string input for 'devices': {value}"
            elif not (
                isinstance(value, list)
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            ):
                return f"bad devices: {value!r}"
        elif key == "vgpu-devices":
            problem = _vgpu_devices(value)
            if problem:
                return f"error validating values in 'vgpu-devices' field: {problem}"
        else:
            return f"unexpected field: {key}"
    return None


def _vgpu_devices(devices: Any) -> str | None:
    if not isinstance(devices, dict):
        return f"not a map: {devices!r}"
    if not devices:
        return None
    kinds = set()
    for name, count in devices.items():
        if TIME_SLICED.match(str(name)):
            kinds.add("time-sliced")
        elif MIG_BACKED.match(str(name)):
            kinds.add("mig-backed")
        else:
            return f"invalid format for '{name}': malformed vGPU type string '{name}'"
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            return f"invalid count for '{count}'"
    if len(kinds) > 1:
        return "cannot mix time-sliced and MIG-backed vGPU devices on the same GPU"
    return None
