"""The API server's CEL rules that the pydantic models do not check, for ``tessera plan``.

The models check types, patterns, bounds and the device grammar; the rules a
CRD carries only as ``x-kubernetes-validations`` (one of two fields, keys that
must match a pattern, ``maxUnavailable`` as a count or a percentage ...) the
API server checks alone. A plan that previewed such a manifest as a change
would be green where the sync fails, so ``manifests.parse`` checks them here,
on the spec as the API server keeps it (null fields dropped, so ``has()`` in CEL
is "the key is there"), with the CRD's message. ``tests/unit/preview/test_manifests.py``
requires every file of ``tests/data/invalid`` (each refused by the real API server in
``tests/integration/test_api_surface.py``) to be refused with its message;
``tests/integration/test_cel_agreement.py`` sends generated cases for every rule to
the API server and here, and requires the same verdicts.

Pure: a spec in, the first broken rule (field, message) out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tessera.api.v1alpha1 import ascend_support, autopilot, backends, mig_profiles, vgpu
from tessera.api.v1alpha1 import scheduler as sched
from tessera.api.v1alpha1.common import (
    MIG_PROFILE_PATTERN,
    RESOURCE_NAME_PATTERN,
    VNPU_TEMPLATE_PATTERN,
)
from tessera.api.v1alpha1.nodepoolgeometry import NOTHING_DECLARED
from tessera.api.v1alpha1.sharingpolicy import (
    ASCEND_MODE_AND_SOFT_SLICING,
    PER_DEVICE_IN_CLASS,
    no_dra_message,
)
from tessera.api.v1alpha1.sharingpolicy import block_message as _block_message
from tessera.api.v1alpha1.sharingpolicy import dra_block_message as _dra_block_message

Spec = Mapping[str, Any]
Broken = tuple[str, str]  # (field under spec, the CRD's message)

_PERCENT = r"^(100|[1-9][0-9]?)%$"
MAX_UNAVAILABLE = "maxUnavailable must be a whole number >= 1 or a percentage between 1% and 100%"
MIG_XOR_VNPU = "mig and vnpu are mutually exclusive: a pool is either NVIDIA or Ascend"
ONE_ALL = "at most one layout may apply to devices: all"
SELECTOR_XOR_POOL = "set exactly one of nodeSelector or poolRef"
SOME_LIMIT = "set at least one resource in hard or total"
DRA_ONLY_FOR_DRA = "spec.dra applies only to a pool with allocation: DRA"
DRA_NOT_ASCEND = (
    "allocation DRA is for NVIDIA GPUs (driver gpu.nvidia.com); an Ascend vnpu pool "
    "uses the device plugin"
)
DRA_MIXED_ONLY = (
    "migStrategy single is a device-plugin setting; a DRA pool publishes every MIG "
    "device by profile"
)
DRA_NEEDS_POOL = "spec.dra needs poolRef: DRA sharing is declared for a pool with allocation: DRA"
DRA_BLOCKS = backends.dra_blocks()
_BLOCKS = backends.blocks()
_KEYS = {
    "profiles": (MIG_PROFILE_PATTERN, "MIG profile names look like 1g.10gb, 3g.40gb or 1g.10gb+me"),
    "templates": (
        VNPU_TEMPLATE_PATTERN,
        "vNPU template names look like vir01, vir04_3c or vir10_3c_16g",
    ),
    "types": (vgpu.VGPU_TYPE_PATTERN, vgpu.TYPE_NAMES),
}
_RESOURCES = (
    RESOURCE_NAME_PATTERN,
    "resource names are qualified extended resources such as nvidia.com/mig-1g.10gb, "
    "DRA devices of a DeviceClass such as mig-1g.10gb.tessera.io.deviceclass.resource.k8s.io/"
    "devices, or object counts such as count/resourceclaims.resource.k8s.io",
)


def messages() -> frozenset[str]:
    """Every message these rules give: the CRDs' CEL messages they are the twins of."""
    fixed = {
        NOTHING_DECLARED,
        MAX_UNAVAILABLE,
        MIG_XOR_VNPU,
        ONE_ALL,
        SELECTOR_XOR_POOL,
        SOME_LIMIT,
        _RESOURCES[1],
    }
    fixed |= {
        mig_profiles.UNKNOWN,
        DRA_ONLY_FOR_DRA,
        DRA_NOT_ASCEND,
        DRA_MIXED_ONLY,
        DRA_NEEDS_POOL,
    }
    fixed |= {
        autopilot.MIN_ABOVE_MAX,
        autopilot.UNKNOWN_MODEL,
        autopilot.CANNOT_HOST,
        autopilot.MIG_POOLS_ONLY,
    }
    fixed |= {vgpu.NO_MIXING, vgpu.VGPU_ALONE, vgpu.VGPU_NOT_DRA, vgpu.VGPU_NO_FORCE}
    fixed |= {sched.VOLCANO_BLOCK, sched.FOR_HAMI, sched.NOT_DRA, PER_DEVICE_IN_CLASS}
    fixed |= {sched.MINDCLUSTER_VOLCANO, sched.VCANNRT_VOLCANO}
    blocks = {_block_message(block, backend) for block, backend in _BLOCKS}
    blocks |= {no_dra_message(backend) for backend in backends.not_dra()}
    blocks |= {ASCEND_MODE_AND_SOFT_SLICING}
    blocks |= {_dra_block_message(block, backend) for block, backend in DRA_BLOCKS}
    return frozenset({*fixed, *blocks, *(message for _, message in _KEYS.values())})


def _matches(pattern: str, text: object) -> bool:
    """CEL's ``text.matches(pattern)`` for the rules' anchored patterns. RE2's ``$`` is the end
    of the text; Python's also matches before a final newline ("1%\\n"), so the whole text must
    match here."""
    return re.fullmatch(pattern, str(text)) is not None


def first_broken(kind: str, spec: Spec) -> Broken | None:
    """The first CEL rule of ``kind`` that ``spec`` breaks, or None."""
    return next(_RULES.get(kind, _none)(spec), None)


def _none(spec: Spec) -> Iterator[Broken]:
    return iter(())


def _rollout(spec: Spec) -> Iterator[Broken]:
    value = (spec.get("rollout") or {}).get("maxUnavailable")
    if value is None:
        return
    if (value < 1) if isinstance(value, int) else not _matches(_PERCENT, value):
        yield "rollout.maxUnavailable", MAX_UNAVAILABLE


def _keys(where: str, mapping: Any, pattern: str, message: str) -> Iterator[Broken]:
    if isinstance(mapping, Mapping) and not all(_matches(pattern, k) for k in mapping):
        yield where, message


def unknown_profiles(profiles: Any) -> str:
    """The CRD's message for MIG profile names no catalog model has, each with the nearest
    known name; "" when every name is known (or, for the pattern's rule, malformed)."""
    if not isinstance(profiles, Mapping):
        return ""
    names = [
        str(k) for k in profiles if _matches(MIG_PROFILE_PATTERN, k) and k not in mig_profiles.KNOWN
    ]
    if not names:
        return ""
    said = []
    for name in names:
        near = difflib.get_close_matches(name, mig_profiles.KNOWN, n=1, cutoff=0.6)
        said.append(f"{name} (did you mean {near[0]}?)" if near else name)
    return f"{mig_profiles.UNKNOWN}: {', '.join(said)}"


def _geometry(spec: Spec) -> Iterator[Broken]:
    declared = ("mig", "vnpu", "vgpu", "dra")
    if not any(block in spec for block in declared) and spec.get("allocation") != "DRA":
        yield "", NOTHING_DECLARED
    if "mig" in spec and "vnpu" in spec:
        yield "", MIG_XOR_VNPU
    dra = spec.get("allocation") == "DRA"
    if "dra" in spec and not dra:
        yield "dra", DRA_ONLY_FOR_DRA
    if dra and "vnpu" in spec:
        yield "allocation", DRA_NOT_ASCEND
    if dra and spec.get("migStrategy", "mixed") != "mixed":
        yield "migStrategy", DRA_MIXED_ONLY
    if "vgpu" in spec and ("mig" in spec or "vnpu" in spec):
        yield "vgpu", vgpu.VGPU_ALONE
    if "vgpu" in spec and dra:
        yield "allocation", vgpu.VGPU_NOT_DRA
    if "vgpu" in spec and ((spec.get("rollout") or {}).get("drain") or {}).get("force") is True:
        yield "rollout.drain.force", vgpu.VGPU_NO_FORCE
    row = ascend_support.row((spec.get("vnpu") or {}).get("chip"))
    if row is not None and not row.supports("DriverTemplates"):
        yield "vnpu", ascend_support.refusal(row.chip, "DriverTemplates")
    for block, counts in (("mig", "profiles"), ("vnpu", "templates"), ("vgpu", "types")):
        layouts = (spec.get(block) or {}).get("layouts") or []
        if sum(1 for lay in layouts if lay.get("devices", "all") == "all") > 1:
            yield f"{block}.layouts", ONE_ALL
        for i, layout in enumerate(layouts):
            yield from _keys(f"{block}.layouts.{i}.{counts}", layout.get(counts), *_KEYS[counts])
            if counts == "profiles" and (unknown := unknown_profiles(layout.get(counts))):
                yield f"{block}.layouts.{i}.{counts}", unknown
            if counts == "types":
                yield from _vgpu_mixing(f"{block}.layouts.{i}.types", layout.get("types"))
    yield from _rollout(spec)
    yield from _autopilot(spec)


def _autopilot(spec: Spec) -> Iterator[Broken]:
    auto = spec.get("autopilot")
    if not isinstance(auto, Mapping):
        return
    served = (
        "mig" in spec
        and spec.get("allocation", "DevicePlugin") == "DevicePlugin"
        and spec.get("migStrategy", "mixed") == "mixed"
    )
    if not served:
        yield "autopilot", autopilot.MIG_POOLS_ONLY
    profiles = auto.get("profiles")
    if not isinstance(profiles, Mapping):
        return
    for model, allowed in profiles.items():
        if isinstance(allowed, Mapping):
            where = f"autopilot.profiles.{model}"
            yield from _keys(where, allowed, *_KEYS["profiles"])
            if unknown := unknown_profiles(allowed):
                yield where, unknown
    table = mig_profiles.BY_MODEL
    if not all(m in table for m in profiles):
        yield "autopilot.profiles", autopilot.UNKNOWN_MODEL
    if any(
        m in table
        and isinstance(allowed, Mapping)
        and any(p not in table[m] and p in mig_profiles.KNOWN for p in allowed)
        for m, allowed in profiles.items()
    ):
        yield "autopilot.profiles", autopilot.CANNOT_HOST
    for model, allowed in profiles.items():
        for name, bounds in (allowed if isinstance(allowed, Mapping) else {}).items():
            if (
                isinstance(bounds, Mapping)
                and isinstance(bounds.get("max"), int)
                and isinstance(bounds.get("min"), int)
                and bounds["min"] > bounds["max"]
            ):
                yield f"autopilot.profiles.{model}.{name}", autopilot.MIN_ABOVE_MAX


def _vgpu_mixing(where: str, types: Any) -> Iterator[Broken]:
    if not isinstance(types, Mapping):
        return
    time_sliced = all(_matches(vgpu.TIME_SLICED_PATTERN, n) for n in types)
    mig_backed = all(_matches(vgpu.MIG_BACKED_PATTERN, n) for n in types)
    if not (time_sliced or mig_backed):
        yield where, vgpu.NO_MIXING


def _sharing(spec: Spec) -> Iterator[Broken]:
    if ("nodeSelector" in spec) == ("poolRef" in spec):
        yield "", SELECTOR_XOR_POOL
    dra = spec.get("dra")
    for block, backend in _BLOCKS:
        if (
            (block in spec)
            if dra is not None
            else (block in spec) != (spec.get("backend") == backend)
        ):
            yield block, _block_message(block, backend)
    if dra is not None:
        if "poolRef" not in spec:
            yield "dra", DRA_NEEDS_POOL
        if spec.get("backend") in backends.not_dra():
            yield "backend", no_dra_message(str(spec.get("backend")))
        for block, backend in DRA_BLOCKS:
            if block in (dra or {}) and spec.get("backend") != backend:
                yield f"dra.{block}", _dra_block_message(block, backend)
        mps = (dra or {}).get("mps") if isinstance(dra, Mapping) else None
        if isinstance(mps, Mapping) and mps.get("defaultPerDevicePinnedMemoryLimit"):
            yield "dra.mps.defaultPerDevicePinnedMemoryLimit", PER_DEVICE_IN_CLASS
    ascend = spec.get("ascend")
    if (
        isinstance(ascend, Mapping)
        and {"mode", "softSlicing"} <= ascend.keys()
        and ascend["softSlicing"] != (ascend["mode"] == "HAMiCore")
    ):
        yield "ascend.softSlicing", ASCEND_MODE_AND_SOFT_SLICING
    if isinstance(ascend, Mapping) and (row := ascend_support.row(ascend.get("chip"))):
        mode = ascend.get("mode") or ("HAMiCore" if ascend.get("softSlicing") else "Templates")
        path = ascend_support.path_of_mode(mode)
        if path is not None and not row.supports(path):
            yield "ascend", ascend_support.refusal(row.chip, path)
    yield from _scheduler(spec)
    if isinstance(ascend, Mapping) and ascend.get("mode") == "MindCluster":
        scheduler = spec.get("scheduler")
        if not isinstance(scheduler, Mapping) or scheduler.get("name") != "Volcano":
            yield "ascend.mode", sched.MINDCLUSTER_VOLCANO
    if isinstance(ascend, Mapping) and ascend.get("mode") == "VCannRT":
        scheduler = spec.get("scheduler")
        if not isinstance(scheduler, Mapping) or scheduler.get("name") != "Volcano":
            yield "ascend.mode", sched.VCANNRT_VOLCANO
    yield from _rollout(spec)


def _scheduler(spec: Spec) -> Iterator[Broken]:
    scheduler = spec.get("scheduler")
    if scheduler is None:
        return
    if spec.get("backend") != "HAMiCore" and "ascend" not in spec:
        yield "scheduler", sched.FOR_HAMI
    if "dra" in spec:
        yield "scheduler", sched.NOT_DRA
    if isinstance(scheduler, Mapping) and ("volcano" in scheduler) != (
        scheduler.get("name") == "Volcano"
    ):
        yield "scheduler.volcano", sched.VOLCANO_BLOCK


def _quota(spec: Spec) -> Iterator[Broken]:
    if not spec.get("hard") and not spec.get("total"):
        yield "", SOME_LIMIT
    for field in ("hard", "total"):
        yield from _keys(field, spec.get(field), *_RESOURCES)


_RULES: Mapping[str, Callable[[Spec], Iterator[Broken]]] = {
    "NodePoolGeometry": _geometry,
    "SharingPolicy": _sharing,
    "TenantQuota": _quota,
}
