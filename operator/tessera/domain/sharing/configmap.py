"""The one device-plugin ConfigMap and the node labels that point into it.

The config-manager sidecar reads only the key named by the node label
``nvidia.com/device-plugin.config``, fails outright when that key is missing,
and never reloads a key whose content was edited. So the contract is:

1. write new keys first (``put``), under content-hashed names;
2. then move node labels (``labels``); every label names a key that exists
   after step 1;
3. delete a key only when no node points at it, now or after step 2
   (``delete`` in the same write; ``delete_after_labels`` once every label
   change succeeded, or on the next resync). The default key is never deleted.

Only keys Tessera wrote (listed in the ConfigMap's managed-keys annotation)
are ever restored or deleted; keys written by people are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tessera.api import constants as c
from tessera.domain.base.rules import Note
from tessera.domain.sharing.device_plugin import DevicePluginConfig, render
from tessera.domain.sharing.nodes import NodeFacts

DEFAULT_CONTENT = render(DevicePluginConfig())  # whole GPUs, no sharing


@dataclass(frozen=True)
class ConfigMapRef:
    """Where the GPU Operator's ``devicePlugin.config`` points (name, default key)."""

    namespace: str = c.DEVICE_PLUGIN_CONFIGMAP_NAMESPACE
    name: str = c.DEVICE_PLUGIN_CONFIGMAP_NAME
    default_key: str = c.DEVICE_PLUGIN_DEFAULT_KEY

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Target:
    """The key a node should point at; ``policy`` None releases it to the default."""

    key: str
    policy: str | None = None


@dataclass(frozen=True)
class LabelChange:
    node: str
    old: str | None
    new: str
    owned: bool  # Tessera keeps the node (annotation = new) or releases it (annotation removed)

    def patch(self) -> dict[str, Any]:
        """JSON merge patch for the Node: the label and Tessera's record of it, together."""
        return {
            "metadata": {
                "labels": {c.DEVICE_PLUGIN_CONFIG_LABEL: self.new},
                "annotations": {
                    c.DEVICE_PLUGIN_CONFIG_APPLIED_ANNOTATION: self.new if self.owned else None
                },
            }
        }


@dataclass(frozen=True)
class ConfigMapPlan:
    ref: ConfigMapRef
    put: Mapping[str, str] = field(default_factory=dict)
    delete: tuple[str, ...] = ()
    delete_after_labels: tuple[str, ...] = ()
    managed: frozenset[str] = frozenset()  # the annotation after the first write
    labels: tuple[LabelChange, ...] = ()
    notes: tuple[Note, ...] = ()
    annotation_stale: bool = False

    @property
    def writes_config_map(self) -> bool:
        return bool(self.put or self.delete or self.annotation_stale)

    @property
    def converged(self) -> bool:
        return not (self.writes_config_map or self.labels or self.delete_after_labels)

    def data_patch(self) -> dict[str, Any]:
        """Merge patch for step 1: keys added or restored, unreferenced keys removed."""
        data: dict[str, str | None] = dict(sorted(self.put.items()))
        data.update(dict.fromkeys(self.delete))
        annotations = {c.MANAGED_KEYS_ANNOTATION: ",".join(sorted(self.managed))}
        return {"metadata": {"annotations": annotations}, "data": data}

    def cleanup_patch(self) -> dict[str, Any]:
        """Merge patch for step 3, valid only once every label change was applied."""
        left = ",".join(sorted(self.managed - set(self.delete_after_labels)))
        return {
            "metadata": {"annotations": {c.MANAGED_KEYS_ANNOTATION: left}},
            "data": dict.fromkeys(self.delete_after_labels),
        }


def managed_keys(annotations: Mapping[str, str] | None) -> frozenset[str]:
    raw = (annotations or {}).get(c.MANAGED_KEYS_ANNOTATION, "")
    return frozenset(k for k in raw.split(",") if k)


def plan(
    ref: ConfigMapRef,
    data: Mapping[str, str] | None,
    *,
    managed: frozenset[str],
    contents: Mapping[str, str],
    nodes: Iterable[NodeFacts],
    targets: Mapping[str, Target],
    owners: Mapping[str, str] | None = None,
) -> ConfigMapPlan:
    """Keys to write, labels to move and keys to delete, in that order.

    ``contents`` maps every key Tessera wants (one per valid policy) to its
    text; ``targets`` maps the nodes to move; nodes absent from it keep their label.
    ``owners`` maps a key to the policy it renders, so each note names whose write it is.
    """
    owners = owners or {}
    data = dict(data or {})
    wanted = dict(contents)
    if ref.default_key not in data or ref.default_key in managed:
        wanted[ref.default_key] = DEFAULT_CONTENT  # a person's default key stays theirs
    put, notes = _puts(ref, data, managed, wanted, owners)
    after = {**data, **put}
    labels: list[LabelChange] = []
    now: set[str] = set()
    nxt: set[str] = set()
    for node in sorted(nodes, key=lambda n: n.name):
        current, target = node.plugin_config, targets.get(node.name)
        if current is not None:
            now.add(current)
        if target is None or target.key not in after:
            nxt.update([current] if current is not None else [])
            continue
        nxt.add(target.key)
        owned = target.policy is not None
        record = target.key if owned else None
        if current != target.key or node.applied_config != record:
            labels.append(LabelChange(node.name, current, target.key, owned))
            notes.append(_label_note(ref, node, target, owners))
    spare = sorted(k for k in managed - set(wanted) if k in data)
    delete = tuple(k for k in spare if k not in now and k not in nxt)
    later = tuple(k for k in spare if k in now and k not in nxt)
    notes += [Note("delete", f"deleted key {k} from {ref}: no node uses it") for k in delete]
    kept = (managed & set(data)) | set(put)
    new_managed = frozenset(kept - set(delete))
    return ConfigMapPlan(
        ref, put, delete, later, new_managed, tuple(labels), tuple(notes), new_managed != managed
    )


def _puts(
    ref: ConfigMapRef,
    data: Mapping[str, str],
    managed: frozenset[str],
    wanted: Mapping[str, str],
    owners: Mapping[str, str],
) -> tuple[dict[str, str], list[Note]]:
    put: dict[str, str] = {}
    notes: list[Note] = []
    for key, text in sorted(wanted.items()):
        if data.get(key) == text:
            continue
        put[key] = text
        who = owners.get(key)
        if key not in managed:
            notes.append(Note("add", f"added key {key} to {ref}", who))
        elif key in data:
            notes.append(Note("restore", f"restored key {key} in {ref} edited by hand", who))
        else:
            notes.append(Note("restore", f"restored key {key} in {ref} deleted by hand", who))
    return put, notes


def _label_note(
    ref: ConfigMapRef, node: NodeFacts, target: Target, owners: Mapping[str, str]
) -> Note:
    label = f"{c.DEVICE_PLUGIN_CONFIG_LABEL}={target.key}"
    current, applied = node.plugin_config, node.applied_config
    if applied is not None and current != applied and target.key == applied:
        was = "removed" if current is None else f"changed to {current}"
        text = f"restored label {label} on node {node.name} ({was} by hand)"
        return Note("restore", text, target.policy)
    if target.policy is None:  # the policy whose key the node ran lets it go
        text = f"returned node {node.name} to the default config ({label})"
        return Note("release", text, owners.get(applied or ""))
    text = f"set {label} on node {node.name} for sharingpolicy/{target.policy}"
    return Note("move", text, target.policy)
