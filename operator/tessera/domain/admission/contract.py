"""What a SharingPolicy's pods must carry for its slices to be allocated (the pod contract).

Facts: docs/facts/hami.md §The pod contract and §Ascend values HAMi ships. HAMi names an
Ascend chip's resources after its ``commonWord``: ``huawei.com/<CW>`` (count), ``-memory``
(MB) and ``-core`` (percent, only in ``hami-core`` mode); a pod without ``huawei.com/vnpu-mode: hami-core`` is
template-sliced and its ``-core`` request is rejected; the vNPU is mounted by the
Ascend Docker Runtime, RuntimeClass ``ascend``; a ``-memory`` request is read as MB,
so ``16Gi`` is out of range. NVIDIA slices under HAMi are ``nvidia.com/gpumem``,
``-percentage`` and ``gpucores`` (HAMi's scheduler), ``volcano.sh/vgpu-*`` under Volcano.
``nvidia.com/gpu`` alone is not guarded: it also names whole GPUs of pools HAMi does not
serve, and a cluster-wide policy cannot tell those pods apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.admission import scheduler_name
from tessera.domain.schedulers import vnpus

VNPU_MODE_ANNOTATION = "huawei.com/vnpu-mode"
HAMI_CORE = "hami-core"
ASCEND_RUNTIME_CLASS = "ascend"
SCHEDULER_NAMES = scheduler_name.DEFAULTS  # the charts' names; HAMi's read from its Deployment
HAMI_GPU_RESOURCES = ("nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores")
VOLCANO_GPU_RESOURCES = (
    "volcano.sh/vgpu-number",
    "volcano.sh/vgpu-memory",
    "volcano.sh/vgpu-memory-percentage",
    "volcano.sh/vgpu-cores",
)
# Volcano's MindCluster mode (docs/facts/ascend.md §MindCluster dynamic vNPU): a pod asks
# huawei.com/npu-core (AI cores: 1, 2 or 4 for a vNPU, 8·n for whole 310P chips) and says
# which family and template level it wants by labels.
NPU_CORE = "huawei.com/npu-core"
RING_CONTROLLER_LABEL = "ring-controller.atlas"
RING_CONTROLLER_310P = "ascend-310P"
VNPU_LEVEL_LABEL = "vnpu-level"
VNPU_LEVELS = ("low", "high")
VNPU_DVPP_LABEL = "vnpu-dvpp"
VNPU_DVPP_VALUES = ("yes", "no", "null")
# vCANN-RT (docs/facts/ascend.md §vCANN-RT): Huawei's Volcano plugin reads a soft-sharing
# job's AI-core percent, HBM MB and scheduling policy from these labels; each pod asks
# huawei.com/Ascend910 equal to its AI-core percent (one physical NPU per container).
AICORE_QUOTA_LABEL = "huawei.com/scheduler.softShareDev.aicoreQuota"
HBM_QUOTA_LABEL = "huawei.com/scheduler.softShareDev.hbmQuota"
SHARE_POLICY_LABEL = "huawei.com/scheduler.softShareDev.policy"
SOFT_SHARE_LABELS = (AICORE_QUOTA_LABEL, HBM_QUOTA_LABEL, SHARE_POLICY_LABEL)
SHARE_POLICIES = ("fixed-share", "elastic", "best-effort")
SHARED_NPU = "huawei.com/Ascend910"
HAMI_CHIPS = tuple(vnpus.SHIPPED)
"""The ``chipName``s HAMi v2.10's chart ships a ``vnpus`` entry for (docs/facts/hami.md
§The pod contract); a node may report one Tessera's own catalog does not split."""


@dataclass(frozen=True)
class AscendPart:
    """The Ascend resources guarded: every chip's count, ``-memory`` and ``-core``."""

    chips: tuple[str, ...]
    counts: tuple[str, ...]
    memory: tuple[str, ...]
    core: tuple[str, ...]
    soft: bool  # soft slicing on: every guarded pod needs the hami-core annotation
    assumed: bool  # no governed node names a chip HAMi knows: every HAMi chip is guarded

    @property
    def resources(self) -> tuple[str, ...]:
        return (*self.counts, *self.memory, *self.core)


@dataclass(frozen=True)
class Contract:
    policy: str
    action: Literal["Warn", "Deny"]
    scheduler: str  # the schedulerName pods must carry
    scheduler_kind: Literal["HAMi", "Volcano"]
    ascend: AscendPart | None
    gpu: tuple[str, ...]  # NVIDIA slice resources (backend HAMiCore)
    mindcluster: bool = False  # spec.ascend.mode MindCluster: huawei.com/npu-core and labels
    vcannrt: bool = False  # spec.ascend.mode VCannRT: pods carrying the softShareDev labels

    @property
    def resources(self) -> tuple[str, ...]:
        npu = (NPU_CORE,) if self.mindcluster else ()
        return (*(self.ascend.resources if self.ascend else ()), *npu, *self.gpu)


def hami_common_word(chip: str) -> str:
    """HAMi's ``commonWord`` of a ``chipName`` (``310P3`` → ``Ascend310P``)."""
    shipped = vnpus.SHIPPED.get(chip)
    return shipped.common_word if shipped else "Ascend" + chip


hami_chip = vnpus.hami_chip


def contract_of(
    name: str,
    spec: SharingPolicySpec,
    chips: Iterable[str],
    names: Mapping[str, str] = SCHEDULER_NAMES,
) -> Contract | None:
    """The contract of policy ``name`` whose governed nodes hold ``chips`` (DCMI chip names;
    ones HAMi ships no entry for are ignored, and none known guards every chip HAMi ships);
    None when it has none (no ``spec.scheduler``, ``podContract: Off``). ``names``: each
    scheduler's ``schedulerName`` (``scheduler_name.names``: HAMi's from its Deployment).
    """
    sched = spec.scheduler
    if sched is None or sched.pod_contract == "Off":
        return None
    part = _ascend(spec, chips) if spec.ascend is not None and spec.ascend.hami else None
    mindcluster = spec.ascend is not None and spec.ascend.effective_mode == "MindCluster"
    vcannrt = spec.ascend is not None and spec.ascend.effective_mode == "VCannRT"
    gpu: tuple[str, ...] = ()
    if spec.backend == "HAMiCore":
        gpu = VOLCANO_GPU_RESOURCES if sched.name == "Volcano" else HAMI_GPU_RESOURCES
    if part is None and not gpu and not mindcluster and not vcannrt:
        return None
    scheduler = names.get(sched.name) or SCHEDULER_NAMES[sched.name]
    kind = sched.name
    return Contract(name, sched.pod_contract, scheduler, kind, part, gpu, mindcluster, vcannrt)


def _ascend(spec: SharingPolicySpec, labels: Iterable[str]) -> AscendPart:
    found = {chip for label in labels if label and (chip := hami_chip(label)) is not None}
    chips = sorted(found) if found else sorted(HAMI_CHIPS)  # unknown: guard every HAMi chip
    words = sorted({hami_common_word(c) for c in chips})
    soft = spec.ascend is not None and spec.ascend.soft
    return AscendPart(
        chips=tuple(chips),
        counts=tuple(f"huawei.com/{w}" for w in words),
        memory=tuple(f"huawei.com/{w}-memory" for w in words),
        core=tuple(f"huawei.com/{w}-core" for w in words),
        soft=soft,
        assumed=not found,
    )
