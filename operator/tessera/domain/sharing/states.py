"""What a node runs now and what it will run after a plan, for classification.

Kept apart from planning so the reading of the cluster (HAMi entries first,
then the device-plugin key the label names, the default key when unlabelled)
is stated once. A config Tessera cannot read counts as unknown (``None``),
which classification treats as a first config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tessera.domain.sharing import changes, configmap, device_plugin, parsing
from tessera.domain.sharing.changes import Effective
from tessera.domain.sharing.nodes import NodeFacts
from tessera.domain.sharing.rendering import PolicyResult


def now(
    node: NodeFacts,
    data: Mapping[str, str],
    ref: configmap.ConfigMapRef,
    nv: Mapping[str, Any] | None,
    asc: Mapping[str, Any] | None,
) -> Effective | None:
    """What the node runs now: Tessera's HAMi fields if it has any, else its label's key."""
    if nv:
        return changes.with_ascend(changes.of_hami(nv), asc)
    key = node.plugin_config or ref.default_key
    config, _ = parsing.parse(data.get(key, configmap.DEFAULT_CONTENT))
    base = changes.of_device_plugin(config) if config is not None else None
    return changes.with_ascend(base, asc) if base is not None else None


def after(
    *,
    target: configmap.Target | None,
    nv: Mapping[str, Any] | None,
    asc: Mapping[str, Any] | None,
    nv_old: Mapping[str, Any] | None,
    data: Mapping[str, str],
    result: PolicyResult | None,
) -> Effective:
    """What the node runs once the plan is applied."""
    if nv:
        return changes.with_ascend(changes.of_hami(nv), asc)
    moving = target is not None and target.policy is not None
    if moving and result is not None and result.config is not None:
        return changes.with_ascend(changes.of_device_plugin(result.config), asc)
    if nv_old:  # released by HAMi: its plugin stays and falls back to its own defaults
        return changes.with_ascend(changes.of_hami({}), asc)
    parsed, _ = parsing.parse(data.get(target.key, "") if target else "")
    config = parsed or device_plugin.DevicePluginConfig()
    return changes.with_ascend(changes.of_device_plugin(config), asc)


def owned_entries(
    document: Mapping[str, Any] | None, list_key: str, owned: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """Tessera-owned fields of each node's entry, by node name."""
    entries = (document or {}).get(list_key) or []
    return {
        str(e["name"]): {k: e[k] for k in owned if k in e}
        for e in entries
        if isinstance(e, dict) and "name" in e
    }
