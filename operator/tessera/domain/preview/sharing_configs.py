"""The sharing configs as a reviewer reads them: per node on one line, per ConfigMap a diff.

``describe`` and ``describe_now`` name the config a node moves to and runs now;
``diffs`` renders the device plugin's ConfigMap and HAMi's node configs as they are and
as ``sharing.planning.plan`` leaves them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from tessera.api import constants as c
from tessera.domain.preview.model import Locations, Raw
from tessera.domain.preview.results import ConfigDiff, unified
from tessera.domain.sharing import parsing, planning
from tessera.domain.sharing.nodes import NodeFacts
from tessera.domain.sharing.rendering import PolicyResult


def describe(result: PolicyResult) -> str:
    """The config ``result`` puts a node on, as one line."""
    if result.hami_fields is not None:
        fields = dict(result.hami_fields)
        mode = fields.pop("operatingmode", "hami-core")
        extra = ", ".join(f"{k}={v}" for k, v in sorted(fields.items()))
        return f"HAMi {mode}" + (f" ({extra})" if extra else "")
    if result.config is not None:
        return f"{result.key}: {_config_text(result.config)}"
    if result.ascend_fields is not None:
        return "Ascend " + ", ".join(f"{k}={v}" for k, v in sorted(result.ascend_fields.items()))
    return result.backend


def describe_now(node: NodeFacts, data: Mapping[str, str]) -> str:
    """The device-plugin config ``node`` runs now, by its label (``default`` without one)."""
    key = node.plugin_config
    if key is None:
        return "default"
    if key not in data:
        return f"{key} (missing)"
    config, _ = parsing.parse(data[key])
    return f"{key}: {_config_text(config)}" if config is not None else key


def _config_text(config: Any) -> str:
    if config.strategy == "none":
        return "exclusive"
    rules = ", ".join(f"{r.name} x{r.replicas}" for r in config.resources)
    return f"{config.strategy} ({rules})"


def diffs(
    plan: planning.SharingPlan,
    data: Mapping[str, str],
    plugin: Raw | None,
    nv_cm: Raw | None,
    asc_cm: Raw | None,
    loc: Locations,
) -> tuple[ConfigDiff, ...]:
    cm = plan.device_plugin
    planned = {**data, **cm.put}
    for key in (*cm.delete, *cm.delete_after_labels):
        planned.pop(key, None)
    ns, name = loc.device_plugin
    out = [unified(f"{ns}/{name}", _render(data) if plugin else "", _render(planned))]
    for cm_obj, key, entries in (
        (nv_cm, c.HAMI_NVIDIA_CONFIGMAP_KEY, plan.hami_nvidia),
        (asc_cm, c.HAMI_ASCEND_CONFIGMAP_KEY, plan.hami_ascend),
    ):
        if not entries.patch:
            continue
        old = ((cm_obj or {}).get("data") or {}).get(key, "")
        where = f"{loc.hami_namespace}/{_hami_name(key)} {key}"
        out.append(unified(where, old, _serialize(key, entries.document)))
    return tuple(d for d in out if d is not None)


def _hami_name(key: str) -> str:
    if key == c.HAMI_NVIDIA_CONFIGMAP_KEY:
        return c.HAMI_NVIDIA_CONFIGMAP_NAME
    return c.HAMI_ASCEND_CONFIGMAP_NAME


def _render(data: Mapping[str, str]) -> str:
    """ConfigMap data as a reviewer reads it: each key, then its text indented."""
    out = []
    for key, text in sorted(data.items()):
        out.append(f"{key}: |\n")
        out.extend(f"  {line}\n" for line in str(text).splitlines())
    return "".join(out)


def _serialize(key: str, document: Mapping[str, Any]) -> str:
    if key.endswith(".json"):
        return json.dumps(document, indent=2) + "\n"
    return yaml.safe_dump(dict(document), sort_keys=False)
