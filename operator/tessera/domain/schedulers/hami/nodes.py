"""Tessera's entries in HAMi's per-node configs, as minimal RFC 6902 patches.

HAMi keeps one list of per-node entries per ConfigMap: ``nodeconfig`` in
``hami-device-plugin``/``config.json`` (NVIDIA) and ``nodes`` in
``hami-device-node-config``/``node-config.yaml`` (Ascend). People write
entries there too (``filterdevices``, ``migstrategy``...), so ownership is per
field: Tessera owns only the fields listed in ``NVIDIA_FIELDS`` /
``ASCEND_FIELDS`` of the nodes it governs (remembered in the ConfigMap's
managed-nodes annotation). Everything else is carried through untouched, and a
released node loses only Tessera's fields (its entry goes only if nothing else
is left in it).

Upstream HAMi has no MPS: ``operatingmode: mps`` is a declared constant with
no code path, and the plugin treats every mode other than ``mig`` as
``hami-core``. So Tessera writes ``hami-core`` for ``mode: MPS`` and says so
in ``MPS_NOTICE`` rather than writing a value that only looks like MPS.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import jsonpatch

from tessera.api import constants as c
from tessera.api.v1alpha1.sharingpolicy import AscendSharing, HamiCore
from tessera.domain.base.rules import Note

NVIDIA_LIST, ASCEND_LIST = "nodeconfig", "nodes"
NVIDIA_FIELDS = ("operatingmode", "devicesplitcount", "devicememoryscaling", "devicecorescaling")
ASCEND_FIELDS = ("hami-vnpu-core", "vDeviceCount")
MPS_NOTICE = (
    "hamiCore.mode MPS is not available in upstream HAMi: the device plugin declares the "
    "operating mode 'mps' but has no MPS code path and runs every mode other than 'mig' as "
    "hami-core. Tessera writes operatingmode hami-core, so these GPUs are shared by HAMi-core "
    "(per-container memory and SM limits, time-sliced), not by CUDA MPS. Use backend MPS for "
    "NVIDIA's MPS, or mode TimeSlicing to say what actually runs."
)


def nvidia_fields(spec: HamiCore) -> dict[str, Any]:
    """Tessera's fields of one ``nodeconfig`` entry. MIG mode ignores the scalings."""
    if spec.mode == "MIG":
        return {"operatingmode": "mig"}
    return {
        "operatingmode": "hami-core",
        "devicesplitcount": spec.device_split_count,
        "devicememoryscaling": spec.device_memory_scaling,
        "devicecorescaling": spec.device_core_scaling,
    }


def ascend_fields(spec: AscendSharing) -> dict[str, Any]:
    """Tessera's fields of one ``nodes`` entry; the slot count matters only when soft."""
    if not spec.soft:
        return {"hami-vnpu-core": False}
    return {"hami-vnpu-core": True, "vDeviceCount": spec.v_device_count}


@dataclass(frozen=True)
class EntriesPlan:
    patch: tuple[dict[str, Any], ...] = ()  # RFC 6902, against the parsed document
    document: Mapping[str, Any] = field(default_factory=dict)  # the document after the patch
    managed: Mapping[str, str] = field(default_factory=dict)  # node -> digest of what Tessera wrote
    notes: tuple[Note, ...] = ()

    @property
    def converged(self) -> bool:
        return not self.patch


def digest(fields: Mapping[str, Any]) -> str:
    """Short hash of the fields Tessera wrote for a node: tells hand edits from policy edits."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:6]


def managed_nodes(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """Parse the managed-nodes annotation: ``node=digest`` pairs, comma-separated."""
    raw = (annotations or {}).get(c.MANAGED_NODES_ANNOTATION, "")
    pairs = (item.partition("=") for item in raw.split(",") if item)
    return {node: mark for node, _, mark in pairs}


def managed_annotation(managed: Mapping[str, str]) -> str:
    return ",".join(f"{node}={mark}" for node, mark in sorted(managed.items()))


def plan_entries(
    document: Mapping[str, Any] | None,
    *,
    list_key: str,
    owned: tuple[str, ...],
    desired: Mapping[str, Mapping[str, Any]],
    managed: Mapping[str, str],
    where: str,
    owners: Mapping[str, str] | None = None,
) -> EntriesPlan:
    """Set ``desired`` fields per node, drop Tessera's fields from released nodes.

    ``managed`` is what Tessera wrote last time (node -> ``digest``); owned
    fields that no longer match it were edited by hand, and the note says so.
    ``where`` names the ConfigMap and key in messages; ``owners`` maps a node to the
    policy that governs it, so each note names whose write it is.
    """
    owners = owners or {}
    before: dict[str, Any] = copy.deepcopy(dict(document or {}))
    entries: list[Any] = copy.deepcopy(before.get(list_key) or [])
    index = {e.get("name"): i for i, e in enumerate(entries) if isinstance(e, dict)}
    notes: list[Note] = []
    for node, fields in sorted(desired.items()):
        i = index.get(node)
        current = {k: entries[i][k] for k in owned if k in entries[i]} if i is not None else None
        if current == dict(fields):
            continue
        edited = node in managed and (current is None or digest(current) != managed[node])
        if i is None:
            index[node] = len(entries)
            entries.append({"name": node})
        entry = entries[index[node]]
        for key in owned:
            entry.pop(key, None)
        entry.update(fields)
        note = _set_note(node, fields, where, edited, current is None)
        notes.append(replace(note, policy=owners.get(node)))
    gone: list[int] = []
    for node in sorted(set(managed) - set(desired)):
        i = index.get(node)
        if i is None or not any(k in entries[i] for k in owned):
            continue
        for key in owned:
            entries[i].pop(key, None)
        if set(entries[i]) <= {"name"}:
            gone.append(i)
        notes.append(Note("release", f"removed Tessera's fields for node {node} from {where}"))
    after = copy.deepcopy(before)
    kept = [e for i, e in enumerate(entries) if i not in gone]
    if kept or list_key in before:
        after[list_key] = kept
    patch = _patch(before, entries, gone, list_key)
    marks = {node: digest(fields) for node, fields in desired.items()}
    return EntriesPlan(tuple(patch), after, marks, tuple(notes))


def _patch(
    before: Mapping[str, Any], entries: list[Any], gone: list[int], list_key: str
) -> list[dict[str, Any]]:
    """Entry by entry, so a change to one node never rewrites its neighbours."""
    old = before.get(list_key)
    if not isinstance(old, list):
        kept = [e for i, e in enumerate(entries) if i not in gone]
        return [{"op": "add", "path": f"/{list_key}", "value": kept}] if kept else []
    ops: list[dict[str, Any]] = []
    for i, entry in enumerate(entries[: len(old)]):
        if i in gone:
            continue
        for op in jsonpatch.make_patch(old[i], entry).patch:
            ops.append({**op, "path": f"/{list_key}/{i}{op['path']}"})
    ops += [{"op": "remove", "path": f"/{list_key}/{i}"} for i in sorted(gone, reverse=True)]
    first_new = len(old) - len(gone)
    added = [e for i, e in enumerate(entries) if i >= len(old) and i not in gone]
    ops += [
        {"op": "add", "path": f"/{list_key}/{first_new + n}", "value": e}
        for n, e in enumerate(added)
    ]
    return ops


def _set_note(
    node: str, fields: Mapping[str, Any], where: str, edited: bool, missing: bool
) -> Note:
    shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in fields.items())
    if not edited:
        return Note("add", f"set {shown} for node {node} in {where}")
    how = "deleted by hand" if missing else "edited by hand"
    return Note("restore", f"restored {shown} for node {node} in {where} ({how})")
