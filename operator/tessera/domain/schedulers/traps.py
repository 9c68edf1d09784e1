"""Traps on the Volcano side of HAMi slicing: each a pure check returning why, or None.

A trap that leaves pods Pending (``stuck``) stops the chain: the policy is ``Stalled``,
reason ``SchedulerTrap``. The others are warnings: the policy stays Ready and says so, with
an Event and a plan note. Facts: docs/facts/volcano.md §Known geometries map, §Arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tessera.domain.schedulers.versions import Version

# Volcano v1.16 reads the vnpus wrapper {hamiVnpuCore, configs} and schedules hami-core vNPUs.
WRAPPER_SINCE = Version(1, 16, 0)
HAMI_CORE_SINCE = Version(1, 16, 0)

# deviceshare.KnownGeometriesCM* are read from v1.12, AscendHAMiVNPUEnable from v1.14: older
# Volcano ignores them and schedules no slice (reference §5.1).
GEOMETRIES_CM_SINCE = Version(1, 12, 0)
ASCEND_HAMI_SINCE = Version(1, 14, 0)
LEGACY_GPU = ("deviceshare.GPUSharingEnable", "deviceshare.GPUNumberEnable")

# HAMi chip keys Volcano does not read, and the value that makes relying on them harmless.
IGNORED_KEYS: Mapping[str, Any] = {
    "resourceCoreName": None,
    "memoryFactor": 1,
    "runtimeClassName": "",
    "overwriteEnv": False,
    "superPod": False,
}


@dataclass(frozen=True)
class Trap:
    message: str
    stuck: bool  # pods stay Pending: Stalled, SchedulerTrap


def map_form_too_new(version: Version, vnpus: Any, where: str) -> Trap | None:
    """Volcano ≤ 1.15 reads ``vnpus`` only as a list: the HAMi ≥ 2.9 wrapper fails to parse
    and Volcano silently falls back to a 310P-only default."""
    if isinstance(vnpus, Mapping) and version < WRAPPER_SINCE:
        return Trap(
            f"Volcano {version} reads vnpus only as a list, but {where} holds the "
            "{hamiVnpuCore, configs} map form: Volcano fails to parse it and silently falls "
            "back to a 310P-only default; upgrade Volcano to v1.16 or point "
            "KnownGeometriesCM* at a map with the list form",
            stuck=True,
        )
    return None


def soft_slicing_too_old(version: Version, soft: bool) -> Trap | None:
    """hami-core (soft) vNPU slicing is scheduled by Volcano only from v1.16."""
    if soft and version < HAMI_CORE_SINCE:
        return Trap(
            f"soft slicing (huawei.com/vnpu-mode: hami-core) needs Volcano v1.16 or newer; "
            f"Volcano {version} cannot schedule hami-core vNPU pods: they stay Pending",
            stuck=True,
        )
    return None


def ignored_keys(chips: Iterable[Mapping[str, Any]]) -> Trap | None:
    """HAMi chip keys set to a non-default value that Volcano never reads."""
    relied: list[str] = []
    for chip in chips:
        derived = f"{chip.get('resourceName')}-core"  # what Volcano uses instead
        for key, harmless in IGNORED_KEYS.items():
            if key == "resourceCoreName" and chip.get(key) == derived:
                continue
            if key in chip and chip[key] not in (harmless, None, ""):
                relied.append(f"{chip.get('chipName', '?')}.{key}={chip[key]}")
    if not relied:
        return None
    return Trap(
        "Volcano does not read these HAMi vnpus keys, so they have no effect when Volcano "
        f"schedules: {', '.join(relied)} (Volcano derives the core resource as "
        "<resourceName>-core; set runtimeClassName on the pods)",
        stuck=False,
    )


def weight_skips_binpack(policy: str, weight: int | None) -> Trap | None:
    """``ScheduleWeight`` 0 or absent: Volcano skips device-level node scoring."""
    if policy == "binpack" and not weight:
        return Trap(
            "deviceshare.ScheduleWeight is 0: Volcano skips device-level node scoring, so "
            "binpack only orders devices within a node, not nodes; set "
            "spec.scheduler.volcano.weight above 0 to pack nodes",
            stuck=False,
        )
    return None


def chips_without_entry(
    pool_chips: Mapping[str, Sequence[str]], known: Iterable[str]
) -> Trap | None:
    """A chip a pool holds with no ``vnpus`` entry: Volcano registers no device for it."""
    have = set(known)
    missing = {
        chip: sorted(pools) for chip, pools in pool_chips.items() if chip not in have and pools
    }
    if not missing:
        return None
    said = "; ".join(f"{chip} (pool {', '.join(p)})" for chip, p in sorted(missing.items()))
    return Trap(
        f"no vnpus entry for chip {said}: Volcano registers no device for it and its pods "
        "stay Pending",
        stuck=True,
    )


def vgpu_fatal(vgpu: bool, arguments: Mapping[str, Any], where: str) -> Trap | None:
    """``VGPUEnable`` with the legacy ``GPUSharingEnable``/``GPUNumberEnable`` on is fatal:
    Volcano's scheduler exits at start (a restart would crash-loop it)."""
    on = [k for k in LEGACY_GPU if arguments.get(k) is True or str(arguments.get(k)) == "true"]
    if vgpu and on:
        return Trap(
            f"{where} has {' and '.join(f'{k}: true' for k in on)}: Volcano exits at start "
            "when deviceshare.VGPUEnable is set with it; nothing written or restarted — turn "
            f"{' and '.join(on)} off to let Tessera enable VGPUEnable",
            stuck=True,
        )
    return None


def arguments_too_old(version: Version, ascend: bool, mindcluster: bool = False) -> Trap | None:
    """Volcano older than the arguments Tessera writes ignores them: no slice is scheduled."""
    missing = []
    if version < GEOMETRIES_CM_SINCE:
        missing.append(f"deviceshare.KnownGeometriesCM* (Volcano {GEOMETRIES_CM_SINCE})")
    if ascend and version < ASCEND_HAMI_SINCE:
        missing.append(f"deviceshare.AscendHAMiVNPUEnable (Volcano {ASCEND_HAMI_SINCE})")
    if mindcluster and version < ASCEND_HAMI_SINCE:  # both came with Volcano v1.14
        missing.append(f"deviceshare.AscendMindClusterVNPUEnable (Volcano {ASCEND_HAMI_SINCE})")
    if not missing:
        return None
    return Trap(
        f"Volcano {version} ignores {' and '.join(missing)}: it would schedule no slice; "
        "nothing written or restarted — upgrade Volcano",
        stuck=True,
    )


def found(*traps: Trap | None) -> tuple[Trap, ...]:
    return tuple(t for t in traps if t is not None)
