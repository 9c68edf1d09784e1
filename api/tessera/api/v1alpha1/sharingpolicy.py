"""SharingPolicy: how the devices of matching nodes are shared."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from tessera.api.v1alpha1 import scheduler as scheduler_rules
from tessera.api.v1alpha1.common import (
    QUANTITY_PATTERN,
    ApiModel,
    Condition,
    LabelSelector,
    RolloutSpec,
    cel,
    validations,
)
from tessera.api.v1alpha1.scheduler import SchedulerSpec, SchedulerStatus

BACKENDS = ("Exclusive", "TimeSlicing", "MPS", "HAMiCore")
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
Backend = Literal["Exclusive", "TimeSlicing", "MPS", "HAMiCore"]


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
    soft_slicing: bool = Field(
        default=False,
        description="Enable HAMi hami-vnpu-core soft slicing on matching Ascend nodes.",
    )
    v_device_count: int = Field(
        default=4, ge=1, le=128, description="Virtual devices per NPU under soft slicing."
    )


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


def _block_rule(block: str, backend: str) -> dict[str, str]:
    return cel(
        f"has(self.dra) ? !has(self.{block}) : has(self.{block}) == (self.backend == '{backend}')",
        f"spec.{block} must be set exactly when backend is {backend}, and never with spec.dra "
        "(a DRA pool's policy sets spec.dra instead)",
        f".{block}",
    )


class SharingPolicySpec(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "has(self.nodeSelector) != has(self.poolRef)",
                "set exactly one of nodeSelector or poolRef",
            ),
            _block_rule("timeSlicing", "TimeSlicing"),
            _block_rule("mps", "MPS"),
            _block_rule("hamiCore", "HAMiCore"),
            cel(
                "!has(self.dra) || has(self.poolRef)",
                "spec.dra needs poolRef: DRA sharing is declared for a pool with allocation: DRA",
                ".dra",
            ),
            cel(
                "!has(self.dra) || self.backend != 'HAMiCore'",
                "backend HAMiCore has no DRA form: NVIDIA's DRA driver shares by TimeSlicing or "
                "MPS",
                ".backend",
            ),
            cel(
                "!has(self.dra) || !has(self.dra.timeSlicing) || self.backend == 'TimeSlicing'",
                "spec.dra.timeSlicing is for backend TimeSlicing",
                ".dra.timeSlicing",
            ),
            cel(
                "!has(self.dra) || !has(self.dra.mps) || self.backend == 'MPS'",
                "spec.dra.mps is for backend MPS",
                ".dra.mps",
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
    backend: Backend = Field(description="Exclusive, TimeSlicing, MPS or HAMiCore.")
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
        default=None, description="Soft slicing of matching Ascend nodes through HAMi."
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
