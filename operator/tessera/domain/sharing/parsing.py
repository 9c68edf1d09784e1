"""Read a device-plugin config back from the ConfigMap.

Needed to know what a node runs now (the key its label points at), so a change
can be classified as in place or disruptive, and to refuse configs the plugin
would misread: it accepts both ``timeSlicing`` and ``mps`` and silently lets
MPS win, so Tessera rejects that combination outright.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import yaml

from tessera.domain.base.rules import RuleError
from tessera.domain.sharing.device_plugin import DevicePluginConfig, Replicated, Strategy

Parsed = tuple[DevicePluginConfig | None, tuple[RuleError, ...]]


@lru_cache(maxsize=1024)
def parse(text: str) -> Parsed:
    """``(config, ())`` when the plugin would read ``text`` as Tessera does, else errors.

    Memoised: a pass reads the config of every node's key, and a thousand nodes
    share a handful of configs (parsing YAML per node was most of an idle
    resync's CPU). The result is immutable, so sharing it is safe.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return None, (RuleError("<document>", f"not YAML: {exc}"),)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        return None, (RuleError("<document>", "must be a mapping"),)
    version = doc.get("version") or "v1"
    if version != "v1":
        return None, (RuleError("version", f"unknown version: {version}"),)
    sharing = doc.get("sharing") or {}
    flags = doc.get("flags") or {}
    if not isinstance(sharing, dict) or not isinstance(flags, dict):
        return None, (RuleError("sharing", "must be a mapping"),)
    ts, mps = sharing.get("timeSlicing"), sharing.get("mps")
    if ts and mps is not None:
        rule = "never both timeSlicing and mps (the plugin would silently use mps)"
        return None, (RuleError("sharing", rule),)
    if mps is not None:
        return _block("mps", mps, flags.get("mpsRoot"))
    if ts:
        return _block("time-slicing", ts, None)
    return DevicePluginConfig(), ()


def _block(strategy: Strategy, block: Any, mps_root: Any) -> Parsed:
    path = "sharing.mps" if strategy == "mps" else "sharing.timeSlicing"
    if not isinstance(block, dict):
        return None, (RuleError(path, "must be a mapping"),)
    items = block.get("resources") or []
    if not isinstance(items, list) or not items:
        return None, (RuleError(f"{path}.resources", "no resources specified"),)
    resources: list[Replicated] = []
    for i, item in enumerate(items):
        where = f"{path}.resources[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("replicas"), int):
            return None, (RuleError(f"{where}.replicas", "no replicas specified"),)
        name = str(item.get("name") or "")
        if not name:
            return None, (RuleError(f"{where}.name", "no resource name specified"),)
        full = name if "/" in name else f"nvidia.com/{name}"  # the plugin adds the prefix
        resources.append(Replicated(full, item["replicas"], where))
    fail = block.get("failRequestsGreaterThanOne")
    config = DevicePluginConfig(
        strategy=strategy,
        resources=tuple(sorted(resources, key=lambda r: r.name)),
        rename_by_default=bool(block.get("renameByDefault", False)),
        fail_requests_greater_than_one=fail if isinstance(fail, bool) else None,
        mps_root=str(mps_root) if mps_root else None,
    )
    return config, ()
