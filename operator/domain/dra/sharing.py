"""A SharingPolicy's opaque config for NVIDIA's DRA driver, checked with the driver's own rules.

Rendered as ``resource.nvidia.com/v1beta1`` ``GpuConfig`` (whole GPUs) or ``MigDeviceConfig``
(MIG devices), field names as the driver decodes them strictly (docs/dra.md §Sharing configs). Backend
Exclusive renders no config. The checks mirror the driver's ``Validate`` (and the limits it
checks later, at prepare), so a config it would refuse on the node — after the pod is bound
— is refused here, naming the field, before any class is written:

* a strategy whose driver feature gate is off on the pool (``spec.dra.featureGates``);
* an interval other than Default, Short, Medium, Long;
* ``defaultActiveThreadPercentage`` outside 0..100;
* a pinned-memory limit under 1Mi (or not a quantity);
* a per-device key that is neither a device index nor a GPU UUID;
* a time-slicing interval on a pool with no whole GPU (``MigDeviceConfig`` has no
  ``timeSlicingConfig``: TimeSlicing on MIG takes no config).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from tessera.api.v1alpha1.nodepoolgeometry import DraFeatureGates
from tessera.api.v1alpha1.sharingpolicy import DraMps, SharingPolicySpec

from .naming import GPU, OPAQUE_API_VERSION

INTERVALS = ("Default", "Short", "Medium", "Long")
MIN_PINNED = 1024 * 1024
_GPU_UUID = re.compile(r"^GPU-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")
_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|[KMGTPE]i|[mkMGTPE])?$"
)
_SUFFIX: dict[str, Decimal | int] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_SUFFIX |= {"m": Decimal("0.001"), "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_SUFFIX |= {"P": 10**15, "E": 10**18}
_GATES = {"TimeSlicing": ("TimeSlicingSettings", "timeSlicingSettings", "timeSlicing")}
_GATES["MPS"] = ("MPSSupport", "mpsSupport", "mps")
Issue = tuple[str, str]
"""(field of the SharingPolicy, what is wrong)."""


def parameters(spec: SharingPolicySpec, selects: str) -> dict[str, Any] | None:
    """The opaque parameters for a class selecting ``selects`` (``gpu`` or a MIG profile)."""
    if spec.backend not in _GATES:
        return None
    kind = "GpuConfig" if selects == GPU else "MigDeviceConfig"
    sharing: dict[str, Any] = {"strategy": spec.backend}
    dra = spec.dra
    if spec.backend == "TimeSlicing" and selects == GPU:
        interval = dra.time_slicing.interval if dra and dra.time_slicing else "Default"
        sharing["timeSlicingConfig"] = {"interval": interval}
    if spec.backend == "MPS" and dra is not None and dra.mps is not None:
        mps = _mps(dra.mps)
        if mps:
            sharing["mpsConfig"] = mps
    return {"apiVersion": OPAQUE_API_VERSION, "kind": kind, "sharing": sharing}


def _mps(mps: DraMps) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if mps.default_active_thread_percentage is not None:
        out["defaultActiveThreadPercentage"] = mps.default_active_thread_percentage
    if mps.default_pinned_device_memory_limit is not None:
        out["defaultPinnedDeviceMemoryLimit"] = mps.default_pinned_device_memory_limit
    if mps.default_per_device_pinned_memory_limit:
        out["defaultPerDevicePinnedMemoryLimit"] = dict(
            sorted(mps.default_per_device_pinned_memory_limit.items())
        )
    return out


def validate(
    spec: SharingPolicySpec, pool: str, gates: DraFeatureGates, whole_gpus: bool
) -> tuple[Issue, ...]:
    """The driver's refusals of this policy's config on ``pool``, each naming the field."""
    backend, dra = spec.backend, spec.dra
    if backend == "HAMiCore":
        why = "backend HAMiCore has no DRA form: NVIDIA's DRA driver shares by TimeSlicing or MPS"
        return (("spec.backend", f"{why} (pool {pool} has allocation: DRA)"),)
    if backend not in _GATES:
        return ()
    issues: list[Issue] = []
    gate, flag, block = _GATES[backend]
    if not getattr(gates, _snake(flag)):
        where = f"spec.dra.{block}" if dra and getattr(dra, _snake(block)) else "spec.backend"
        issues.append((where, (
            f'"{backend}" is selected as the GPU sharing strategy, but the "{gate}" feature gate '
            f"is not enabled on pool {pool} (NodePoolGeometry {pool} "
            f"spec.dra.featureGates.{flag} is false)"
        )))  # fmt: skip
    if backend == "TimeSlicing" and dra and dra.time_slicing:
        interval = dra.time_slicing.interval
        if interval not in INTERVALS:
            issues.append(("spec.dra.timeSlicing.interval", (
                f"unknown time-slice interval: {interval}, supported time-slice intervals: "
                + ", ".join(INTERVALS)
            )))  # fmt: skip
        elif not whole_gpus and interval != "Default":
            issues.append(("spec.dra.timeSlicing.interval", (
                f"pool {pool} provides MIG devices only, and TimeSlicing on MIG takes no config "
                "(MigDeviceConfig has no timeSlicingConfig): remove the interval"
            )))  # fmt: skip
    if backend == "MPS" and dra and dra.mps:
        issues.extend(_mps_issues(dra.mps))
    return tuple(issues)


def _mps_issues(mps: DraMps) -> list[Issue]:
    issues: list[Issue] = []
    field = "spec.dra.mps.defaultActiveThreadPercentage"
    percentage = mps.default_active_thread_percentage
    if percentage is not None and percentage < 0:
        issues.append((field, "must not be negative"))
    if percentage is not None and percentage > 100:
        issues.append((field, "must not be greater than 100"))
    limit = mps.default_pinned_device_memory_limit
    if limit is not None:
        issues.extend(_limit("spec.dra.mps.defaultPinnedDeviceMemoryLimit", limit))
    for key, value in sorted(mps.default_per_device_pinned_memory_limit.items()):
        field = f"spec.dra.mps.defaultPerDevicePinnedMemoryLimit[{key}]"
        if not (key.isdigit() or _GPU_UUID.match(key)):
            issues.append((field, (
                f'invalid device: {key} is neither a device index such as "0" nor a GPU UUID '
                "(GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
            )))  # fmt: skip
        issues.extend(_limit(field, value))
    return issues


def _limit(field: str, value: str) -> list[Issue]:
    size = quantity_bytes(value)
    if size is None:
        return [(field, f"invalid limit: {value} is not a quantity such as 10Gi")]
    if size < MIN_PINNED:
        return [(field, f"invalid limit: {value} value set too low (at least 1Mi)")]
    return []


def quantity_bytes(value: str) -> Decimal | None:
    """The number ``value`` (a Kubernetes quantity) stands for; None when it is not one."""
    found = _QUANTITY.match(value.strip())
    if found is None:
        return None
    number, suffix = found.groups()
    try:
        if suffix and suffix[0] in "eE" and len(suffix) > 1:
            return Decimal(number) * Decimal(10) ** int(suffix[1:])
        return Decimal(number) * Decimal(_SUFFIX[suffix or ""])
    except (InvalidOperation, KeyError):
        return None


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", r"_\1", name).lower()


def describe(config: Mapping[str, Any] | None) -> str:
    """A short word for logs: the strategy a class's config sets, or ``exclusive``."""
    return str(config["sharing"]["strategy"]) if config else "exclusive"
