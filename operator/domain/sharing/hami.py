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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from tessera.api.v1alpha1.sharingpolicy import AscendSharing, HamiCore

from .rules import Note

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
    if not spec.soft_slicing:
        return {"hami-vnpu-core": False}
    return {"hami-vnpu-core": True, "vDeviceCount": spec.v_device_count}


@dataclass(frozen=True)
class EntriesPlan:
    patch: tuple[dict[str, Any], ...] = ()  # RFC 6902, against the parsed document
    document: Mapping[str, Any] = field(default_factory=dict)  # the document after the patch
    managed: frozenset[str] = frozenset()  # nodes whose fields Tessera owns afterwards
    notes: tuple[Note, ...] = ()

    @property
    def converged(self) -> bool:
        return not self.patch


def plan_entries(
    document: Mapping[str, Any] | None,
    *,
    list_key: str,
    owned: tuple[str, ...],
    desired: Mapping[str, Mapping[str, Any]],
    managed: frozenset[str],
    where: str,
) -> EntriesPlan:
    """Set ``desired`` fields per node, drop Tessera's fields from released nodes.

    ``where`` names the ConfigMap and key in messages (``kube-system/hami-device-plugin``).
    """
    before: dict[str, Any] = copy.deepcopy(dict(document or {}))
    after = copy.deepcopy(before)
    entries: list[Any] = after.get(list_key) or []
    by_name = {e.get("name"): e for e in entries if isinstance(e, dict)}
    notes: list[Note] = []
    for node, fields in sorted(desired.items()):
        entry = by_name.get(node)
        if entry is None:
            entry = {"name": node}
            entries.append(entry)
            by_name[node] = entry
            action, how = ("restore", "deleted by hand") if node in managed else ("add", "")
        else:
            stale = {k: entry[k] for k in owned if k in entry and entry.get(k) != fields.get(k)}
            missing = [k for k in fields if k not in entry]
            if not stale and not missing:
                continue
            action, how = ("restore", "edited by hand") if node in managed else ("add", "")
        for key in owned:
            entry.pop(key, None)
        entry.update(fields)
        shown = ", ".join(f"{k}={v}" for k, v in fields.items())
        verb = "restored" if action == "restore" else "set"
        tail = f" ({how})" if how else ""
        notes.append(Note(action, f"{verb} {shown} for node {node} in {where}{tail}"))
    for node in sorted(managed - set(desired)):
        entry = by_name.get(node)
        if entry is None or not any(k in entry for k in owned):
            continue
        for key in owned:
            entry.pop(key, None)
        if set(entry) <= {"name"}:
            entries.remove(entry)
        notes.append(Note("release", f"removed Tessera's fields for node {node} from {where}"))
    if entries or list_key in before:
        after[list_key] = entries
    patch = jsonpatch.make_patch(before, after).patch
    return EntriesPlan(tuple(patch), after, frozenset(desired), tuple(notes))
