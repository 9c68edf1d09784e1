"""A SharingPolicy's opaque config for NVIDIA's DRA driver, checked with the driver's own rules.

Rendered as ``resource.nvidia.com/v1beta1`` ``GpuConfig`` (whole GPUs) or ``MigDeviceConfig``
(MIG devices), field names as the driver decodes them strictly (see
docs/dra.md §Sharing configs). Backend Exclusive renders no config. The checks mirror the
driver's ``Validate`` (and the limits it checks later, at prepare), so a config it would
refuse on the node — after the pod is bound — is refused here, naming the field, before
any class is written:

* a strategy whose driver feature gate is off on the pool (``spec.dra.featureGates``);
* an interval other than Default, Short, Medium, Long;
* ``defaultActiveThreadPercentage`` outside 0..100;
* a pinned-memory limit the driver reads as under 1Mi (the byte count rounded up, then
  whole MiB) or that overflows its 64-bit byte count (or that is not a quantity);
* any per-device pinned-memory key: a class's config applies to every claim of the class,
  and the driver resolves each key against the devices of the claim at prepare (an index
  must be below their count, a UUID one of theirs): no key holds for every claim;
* a time-slicing interval on a pool with no whole GPU (``MigDeviceConfig`` has no
  ``timeSlicingConfig``: TimeSlicing on MIG takes no config).

What the renderer writes is only what holds for any allocation of the class (1 or N whole
GPUs, 1 or N MIG devices): docs/dra.md §What each field means to the driver.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from tessera.api.v1alpha1.nodepoolgeometry import DraFeatureGates
from tessera.api.v1alpha1.sharingpolicy import (
    PER_DEVICE_FIELD,
    PER_DEVICE_WHY,
    DraMps,
    SharingPolicySpec,
)
from tessera.domain.dra.naming import GPU, OPAQUE_API_VERSION

INTERVALS = ("Default", "Short", "Medium", "Long")
MIN_PINNED = 1024 * 1024
MAX_PINNED = 2**63 - 1
"""The driver reads a limit as a signed 64-bit byte count; a larger one wraps."""
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
    # never defaultPerDevicePinnedMemoryLimit: no key holds for every claim (``validate``)
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
    keys = sorted(mps.default_per_device_pinned_memory_limit)
    if keys:  # stored before the CRD refused it (its rule: api.v1alpha1.sharingpolicy)
        issues.append((PER_DEVICE_FIELD, f"{PER_DEVICE_WHY}; keys set: {', '.join(keys)}"))
    return issues


def _limit(field: str, value: str) -> list[Issue]:
    size = quantity_bytes(value)
    if size is None:
        return [(field, f"invalid limit: {value} is not a quantity such as 10Gi")]
    if math.ceil(size) < MIN_PINNED:  # the driver: bytes rounded up, then whole MiB > 0
        return [(field, f"invalid limit: {value} value set too low (at least 1Mi)")]
    if math.ceil(size) > MAX_PINNED:
        return [(field, f"invalid limit: {value} is over the driver's 64-bit byte count (8Ei)")]
    return []


def quantity_bytes(value: str) -> Decimal | None:
    """The number ``value`` (a Kubernetes quantity) stands for; None when it is not one."""
    found = _QUANTITY.match(value.strip())
    if found is None:
        return None
    number, suffix = found.groups()
    try:
        if suffix and suffix[0] in "eE" and suffix != "Ei" and len(suffix) > 1:  # 1e9, not 1Ei
            return Decimal(number) * Decimal(10) ** int(suffix[1:])
        return Decimal(number) * Decimal(_SUFFIX[suffix or ""])
    except (InvalidOperation, KeyError):
        return None


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", r"_\1", name).lower()


def describe(config: Mapping[str, Any] | None) -> str:
    """A short word for logs: the strategy a class's config sets, or ``exclusive``."""
    return str(config["sharing"]["strategy"]) if config else "exclusive"
