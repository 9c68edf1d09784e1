"""What a SharingPolicy pass reads of HAMi's node configs and the device-plugin ConfigMap.

Raw ConfigMaps → ``planning.SharingObserved``, for the controller and ``tessera plan``
alike (split from ``tessera.domain.cluster.objects``). Pure: objects in, values out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml

from tessera.domain.schedulers.hami import nodes as hami
from tessera.domain.sharing import nodes as node_facts
from tessera.domain.sharing import planning

Raw = Mapping[str, Any]


@dataclass(frozen=True)
class HamiDocument:
    """One HAMi ConfigMap key, parsed; ``parsed`` is None when absent or unreadable."""

    parsed: Mapping[str, Any] | None = None
    managed: Mapping[str, str] = field(default_factory=dict)
    error: str = ""


def hami_document(obj: Raw | None, key: str) -> HamiDocument:
    """Parse HAMi's node config; a document a person broke is reported, never guessed at."""
    if obj is None:
        return HamiDocument()
    meta = obj["metadata"]
    where = f"{meta.get('namespace', '')}/{meta['name']} {key}"
    managed = hami.managed_nodes(meta.get("annotations"))
    text = (obj.get("data") or {}).get(key, "")
    try:
        parsed = (json.loads(text) if key.endswith(".json") else yaml.safe_load(text)) or {}
    except (ValueError, yaml.YAMLError) as err:
        return HamiDocument(None, {}, f"{where}: {err}")
    if not isinstance(parsed, dict):
        return HamiDocument(None, {}, f"{where}: not a map")
    return HamiDocument(parsed, managed)


class ParsedHami(Protocol):
    """A HAMi node config as read: ``HamiDocument`` here, the controller's ``ConfigDocument``."""

    @property
    def parsed(self) -> Mapping[str, Any] | None: ...
    @property
    def managed(self) -> Mapping[str, str]: ...


def sharing_observed(
    facts: Iterable[node_facts.NodeFacts],
    plugin_map: Raw | None,
    nvidia: ParsedHami,
    ascend: ParsedHami,
) -> planning.SharingObserved:
    """What a sharing plan reads. An absent device-plugin ConfigMap stays absent (``None``),
    never an empty one: planning writes no map on a cluster that has none and no NVIDIA node."""
    return planning.SharingObserved(
        tuple(facts),
        None if plugin_map is None else plugin_map.get("data") or {},
        (plugin_map or {}).get("metadata", {}).get("annotations") or {},
        nvidia.parsed,
        nvidia.managed,
        ascend.parsed,
        ascend.managed,
    )
