"""SharingPolicy: how the devices of matching nodes are shared."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from tessera.api.v1alpha1 import ascend_support
from tessera.api.v1alpha1 import scheduler as scheduler_rules
from tessera.api.v1alpha1.backends import (
    ASCEND_MODES,
    BACKENDS,
    Backend,
    ServedAscendMode,
    blocks,
    dra_blocks,
    not_dra,
)
from tessera.api.v1alpha1.common import (
    QUANTITY_PATTERN,
    ApiModel,
    Condition,
    LabelSelector,
    RolloutSpec,
    cel,
    message_expression,
    validations,
)
from tessera.api.v1alpha1.scheduler import SchedulerSpec, SchedulerStatus

PER_DEVICE_FIELD = "spec.dra.mps.defaultPerDevicePinnedMemoryLimit"
PER_DEVICE_WHY = (
    "cannot be set: a SharingPolicy's config goes into DeviceClasses, which apply to every "
    "claim of the class, and NVIDIA's DRA driver fails a claim's preparation when a key names "
    "an index beyond the claim's devices or a UUID not allocated to it (a MIG device's UUID is "
    "not its GPU's); set defaultPinnedDeviceMemoryLimit (every device of a claim), or "
    "per-device limits in the opaque config of a ResourceClaim or ResourceClaimTemplate "
    "(docs/dra.md)"
)
PER_DEVICE_IN_CLASS = f"{PER_DEVICE_FIELD} {PER_DEVICE_WHY}"
"""The CRD's message for per-device pinned-memory keys in a class-level config; its twins:
``api.v1alpha1.rules`` (``tessera plan``) and ``domain.dra.sharing`` (a policy stored before
the rule existed)."""
ASCEND_MODE_AND_SOFT_SLICING = (
    "spec.ascend.softSlicing is the old spelling of mode (true: HAMiCore, false: Templates) "
    "and disagrees with spec.ascend.mode: set only mode"
)


_NAMES = tuple(BACKENDS)


class PoolRef(ApiModel):
    name: str = Field(
        min_length=1, description="Name of a NodePoolGeometry whose nodes this governs."
    )


class TimeSlicingResource(ApiModel):
    name: str = Field(
        pattern=r"^nvidia\.com/(gpu|mig-[1-7]g\.[0-9]+gb(\.(me|me\.all|gfx)|-me)?)$",
        description="nvidia.com/gpu or a MIG resource such as nvidia.com/mig-1g.10gb.",
    )
    replicas: int = Field(ge=2, le=1024, description="Time-sliced replicas of each such device.")


class TimeSlicing(ApiModel):
    replicas: int = Field(
        default=2, ge=2, le=1024, description="Replicas advertised per device (>= 2)."
    )
    rename_by_default: bool = Field(
        default=False, description="Advertise <resource>.shared instead of <resource>."
    )
    fail_requests_greater_than_one: bool = Field(
        default=True,
        description="Reject pods asking for more than one replica: two replicas are not "
        "twice the GPU.",
    )
    resources: list[TimeSlicingResource] = Field(
        default_factory=list,
        max_length=32,
        description="Per-resource replicas (e.g. for MIG devices); default: nvidia.com/gpu.",
    )


class Mps(ApiModel):
    replicas: int = Field(
        ge=2, le=48, description="MPS clients per GPU (2-48); not allowed on MIG-enabled nodes."
    )


class HamiCore(ApiModel):
    mode: Literal["TimeSlicing", "MPS", "MIG"] = Field(
        default="TimeSlicing",
        description="HAMi node operating mode: hami-core (TimeSlicing), MPS, or MIG.",
    )
    device_split_count: int = Field(
        default=10, ge=1, le=128, description="Tasks that may share one GPU."
    )
    device_memory_scaling: float = Field(
        default=1.0, gt=0, le=10, description="Memory oversubscription factor (1 = none)."
    )
    device_core_scaling: float = Field(
        default=1.0, gt=0, le=10, description="Compute oversubscription factor (1 = none)."
    )


class AscendSharing(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "!has(self.mode) || !has(self.softSlicing) || "
                "self.softSlicing == (self.mode == 'HAMiCore')",
                ASCEND_MODE_AND_SOFT_SLICING,
                ".softSlicing",
            ),
            message_expression(ascend_support.cel_mode_rule(), ascend_support.cel_mode_message()),
        )
    )

    mode: ServedAscendMode | None = Field(
        default=None,
        description="How matching Ascend nodes are shared: Templates (the driver's vir* "
        "templates, allocated whole by HAMi), HAMiCore (HAMi hami-vnpu-core soft slicing) or "
        "MindCluster (Volcano's MindCluster dynamic vNPU: Huawei's device plugin creates a vNPU "
        "per pod; 310P only, scheduler Volcano) or VCannRT (Huawei's vCANN-RT soft slicing: "
        "Tessera's Ascend agent switches each NPU into device-share mode; 910B4 only, scheduler "
        "Volcano; reference-only upstream). Absent: from softSlicing.",
    )
    soft_slicing: bool | None = Field(
        default=None,
        description="Deprecated spelling of mode: true is HAMiCore, false or absent Templates.",
    )
    chip: ascend_support.ChipName | None = Field(
        default=None,
        description="The Ascend chip of the nodes governed, when known: the API server refuses "
        "a mode the chip does not support (the support matrix, docs/facts/ascend.md). Absent: "
        "the operator checks each node's node.kubernetes.io/npu.chip.name label instead.",
    )
    v_device_count: int = Field(
        default=4, ge=1, le=128, description="Virtual devices per NPU under soft slicing."
    )

    @property
    def effective_mode(self) -> ServedAscendMode:
        """The mode, read the one way: ``mode``, else the old boolean converted."""
        if self.mode is not None:
            return self.mode
        return "HAMiCore" if self.soft_slicing else "Templates"

    @property
    def soft(self) -> bool:
        """HAMi's ``hamiVnpuCore``: the mode slices an NPU below its templates."""
        return ASCEND_MODES[self.effective_mode].soft

    @property
    def hami(self) -> bool:
        """HAMi's Ascend device plugin serves the mode (its node config, ``hamiVnpuCore``)."""
        return ASCEND_MODES[self.effective_mode].hami


class NodeSummary(ApiModel):
    matched: int = Field(default=0, description="Nodes this policy selects.")
    applied: int = Field(default=0, description="Nodes running this policy's config.")
    conflicted: int = Field(
        default=0, description="Nodes claimed by another policy of equal priority."
    )


class DraTimeSlicing(ApiModel):
    interval: Literal["Default", "Short", "Medium", "Long"] = Field(
        default="Default",
        description="The time slice the driver sets on the whole physical GPU "
        "(GpuConfig sharing.timeSlicingConfig.interval).",
    )


class DraMps(ApiModel):
    default_active_thread_percentage: int | None = Field(
        default=None, ge=0, le=100, description="Share of the GPU's threads per MPS client, 0-100."
    )
    default_pinned_device_memory_limit: str | None = Field(
        default=None,
        pattern=QUANTITY_PATTERN,
        description="Pinned device memory per client on every device of a claim, e.g. 10Gi "
        "(at least 1Mi).",
    )
    # Kept in the schema so that a policy stored before the rule keeps its keys (a field
    # removed from a CRD is pruned silently: the limits would vanish with the class Ready);
    # such a policy is refused by the operator, naming the field (domain.dra.sharing).
    default_per_device_pinned_memory_limit: dict[str, str] = Field(
        default_factory=dict,
        description="Refused (must be empty): per-device limits belong in a ResourceClaim's or "
        "ResourceClaimTemplate's opaque config, not in a DeviceClass (see docs/dra.md).",
        json_schema_extra={
            "maxProperties": 16,
            "additionalProperties": {"type": "string", "pattern": QUANTITY_PATTERN},
            **validations(cel("size(self) == 0", PER_DEVICE_IN_CLASS)),
        },
    )


class DraSharing(ApiModel):
    time_slicing: DraTimeSlicing | None = Field(
        default=None, description="For backend TimeSlicing (interval Default if absent)."
    )
    mps: DraMps | None = Field(
        default=None, description="For backend MPS (driver defaults if absent)."
    )


def block_message(block: str, backend: str) -> str:
    """The CRD's message for a backend's spec block (``tessera plan`` says the same)."""
    return (
        f"spec.{block} must be set exactly when backend is {backend}, and never with spec.dra "
        "(a DRA pool's policy sets spec.dra instead)"
    )


def dra_block_message(block: str, backend: str) -> str:
    return f"spec.dra.{block} is for backend {backend}"


def no_dra_message(backend: str) -> str:
    shared_by = " or ".join(b for _, b in dra_blocks())
    return f"backend {backend} has no DRA form: NVIDIA's DRA driver shares by {shared_by}"


def _block_rule(block_name: str, backend: str) -> dict[str, str]:
    return cel(
        f"has(self.dra) ? !has(self.{block_name}) : "
        f"has(self.{block_name}) == (self.backend == '{backend}')",
        block_message(block_name, backend),
        f".{block_name}",
    )


class SharingPolicySpec(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "has(self.nodeSelector) != has(self.poolRef)",
                "set exactly one of nodeSelector or poolRef",
            ),
            *(_block_rule(block, backend) for block, backend in blocks()),
            cel(
                "!has(self.dra) || has(self.poolRef)",
                "spec.dra needs poolRef: DRA sharing is declared for a pool with allocation: DRA",
                ".dra",
            ),
            *(
                cel(
                    f"!has(self.dra) || self.backend != '{backend}'",
                    no_dra_message(backend),
                    ".backend",
                )
                for backend in not_dra()
            ),
            *(
                cel(
                    f"!has(self.dra) || !has(self.dra.{block}) || self.backend == '{backend}'",
                    dra_block_message(block, backend),
                    f".dra.{block}",
                )
                for block, backend in dra_blocks()
            ),
            cel(
                "!has(self.scheduler) || self.backend == 'HAMiCore' || has(self.ascend)",
                scheduler_rules.FOR_HAMI,
                ".scheduler",
            ),
            cel(
                "!has(self.scheduler) || !has(self.dra)",
                scheduler_rules.NOT_DRA,
                ".scheduler",
            ),
            cel(
                "!has(self.ascend) || !has(self.ascend.mode) || self.ascend.mode != 'MindCluster' "
                "|| (has(self.scheduler) && self.scheduler.name == 'Volcano')",
                scheduler_rules.MINDCLUSTER_VOLCANO,
                ".ascend.mode",
            ),
            cel(
                "!has(self.ascend) || !has(self.ascend.mode) || self.ascend.mode != 'VCannRT' "
                "|| (has(self.scheduler) && self.scheduler.name == 'Volcano')",
                scheduler_rules.VCANNRT_VOLCANO,
                ".ascend.mode",
            ),
        )
    )

    node_selector: LabelSelector | None = Field(default=None, description="The nodes governed.")
    pool_ref: PoolRef | None = Field(
        default=None, description="Govern the nodes of this NodePoolGeometry instead."
    )
    priority: int = Field(
        default=0,
        ge=-1000,
        le=1000,
        description="On overlap the higher priority wins; equal priorities are a Conflict.",
    )
    backend: Backend = Field(description=f"{', '.join(_NAMES[:-1])} or {_NAMES[-1]}.")
    time_slicing: TimeSlicing | None = Field(default=None, description="For backend TimeSlicing.")
    mps: Mps | None = Field(default=None, description="For backend MPS.")
    hami_core: HamiCore | None = Field(default=None, description="For backend HAMiCore.")
    dra: DraSharing | None = Field(
        default=None,
        description="For a pool with allocation: DRA: the sharing settings Tessera puts in the "
        "config of this policy's DeviceClasses (GpuConfig / MigDeviceConfig). Pods share a "
        "device by referencing one ResourceClaim.",
    )
    ascend: AscendSharing | None = Field(
        default=None, description="How matching Ascend nodes are shared (mode)."
    )
    scheduler: SchedulerSpec | None = Field(
        default=None,
        description="The scheduler side of HAMi slices: Tessera keeps HAMi's device config "
        "and, for Volcano, the deviceshare plugin's arguments consistent with this policy, and "
        "guards the pod contract. Absent: only the node side is written.",
    )
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec,
        description="Used when a change disrupts running pods (a backend switch).",
    )


class SharingPolicyStatus(ApiModel):
    observed_generation: int = Field(default=0, description="The generation this status describes.")
    config_key: str = Field(default="", description="Key of this policy's device-plugin config.")
    nodes: NodeSummary = Field(default_factory=NodeSummary, description="Nodes by state.")
    device_classes: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="For a DRA pool: the DeviceClasses carrying this policy's sharing config.",
    )
    advertised: dict[str, str] = Field(
        default_factory=dict, description="Resources the governed nodes advertise, summed."
    )
    scheduler: SchedulerStatus | None = Field(
        default=None, description="For spec.scheduler: what Tessera found and wrote."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling, Stalled.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
