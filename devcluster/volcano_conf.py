"""What Volcano's scheduler reads of ``volcano-scheduler.conf``: a stand-in for its own parser.

Written from Volcano's code and docs (docs/facts/volcano.md), never through Tessera's: the conf
is unmarshalled into ``SchedulerConfiguration`` (``actions`` a comma-separated string,
``tiers[].plugins[]`` with ``name`` and ``arguments``, ``configurations[]`` with ``name`` and
``arguments``) by a YAML decoder that refuses a key written twice in one map; the
``deviceshare`` plugin reads each switch with ``Arguments.GetBool`` (a YAML boolean, anything
else leaves it off); Volcano's MindCluster vNPU reads ``presetVirtualDevice`` from the
``init-params`` configuration as a string and segments vNPUs dynamically only when it is
``"false"``.

:func:`read` returns what the scheduler would run with, or raises :class:`ConfError` where
Volcano would exit at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

DEVICESHARE = "deviceshare"
MINDCLUSTER = "deviceshare.AscendMindClusterVNPUEnable"
HAMI_VNPU = "deviceshare.AscendHAMiVNPUEnable"
VGPU = "deviceshare.VGPUEnable"
GPU_SHARING, GPU_NUMBER = "deviceshare.GPUSharingEnable", "deviceshare.GPUNumberEnable"


class ConfError(ValueError):
    """A conf Volcano refuses at start-up."""


@dataclass(frozen=True)
class VolcanoReads:
    actions: tuple[str, ...]
    plugins: tuple[str, ...]  # every tier's plugin names, in order
    deviceshare: Mapping[str, Any]
    configurations: Mapping[str, Mapping[str, Any]]
    mindcluster_vnpu: bool  # the ascend310p-vNPU device is registered
    hami_vnpu: bool
    vgpu: bool
    dynamic_vnpu: bool  # init-params presetVirtualDevice is the string "false"


class _StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a map key written twice (as Volcano's decoder does)."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            line = key_node.start_mark.line + 1
            raise ConfError(f"line {line}: mapping key {key!r} already defined")
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _get_bool(arguments: Mapping[str, Any], key: str) -> bool:
    value = arguments.get(key)
    return value if isinstance(value, bool) else False


def read(text: str) -> VolcanoReads:
    try:
        conf = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as err:
        raise ConfError(f"cannot unmarshal volcano-scheduler.conf: {err}") from None
    if not isinstance(conf, Mapping):
        raise ConfError("volcano-scheduler.conf is not a map")
    actions = conf.get("actions")
    if not isinstance(actions, str) or not actions.strip():
        raise ConfError("actions must be a non-empty comma-separated string")
    plugins: list[str] = []
    share: Mapping[str, Any] = {}
    for tier in conf.get("tiers") or []:
        if not isinstance(tier, Mapping) or not isinstance(tier.get("plugins") or [], list):
            raise ConfError("a tier must be a map with a plugins list")
        for plugin in tier.get("plugins") or []:
            if not isinstance(plugin, Mapping) or not isinstance(plugin.get("name"), str):
                raise ConfError("a plugin must be a map with a name")
            args = plugin.get("arguments") or {}
            if not isinstance(args, Mapping):
                raise ConfError(f"plugin {plugin['name']}: arguments must be a map")
            plugins.append(plugin["name"])
            if plugin["name"] == DEVICESHARE:
                share = dict(args)
    configurations: dict[str, Mapping[str, Any]] = {}
    for entry in conf.get("configurations") or []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfError("a configuration must be a map with a name")
        args = entry.get("arguments") or {}
        if not isinstance(args, Mapping):
            raise ConfError(f"configuration {entry['name']}: arguments must be a map")
        configurations[entry["name"]] = dict(args)
    if _get_bool(share, VGPU) and (_get_bool(share, GPU_SHARING) or _get_bool(share, GPU_NUMBER)):
        raise ConfError("deviceshare: VGPUEnable with GPUSharingEnable or GPUNumberEnable")
    preset = (configurations.get("init-params") or {}).get("presetVirtualDevice")
    return VolcanoReads(
        actions=tuple(a.strip() for a in actions.split(",")),
        plugins=tuple(plugins),
        deviceshare=share,
        configurations=configurations,
        mindcluster_vnpu=_get_bool(share, MINDCLUSTER),
        hami_vnpu=_get_bool(share, HAMI_VNPU),
        vgpu=_get_bool(share, VGPU),
        dynamic_vnpu=preset == "false",
    )
