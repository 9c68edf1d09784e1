"""SharingPolicy: how the devices of matching nodes are shared."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from .common import (
    ApiModel,
    Condition,
    LabelSelector,
    RolloutSpec,
    cel,
    validations,
)

BACKENDS = ("Exclusive", "TimeSlicing", "MPS", "HAMiCore")
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


def _block_rule(block: str, backend: str) -> dict[str, str]:
    return cel(
        f"has(self.{block}) == (self.backend == '{backend}')",
        f"spec.{block} must be set exactly when backend is {backend}",
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
    ascend: AscendSharing | None = Field(
        default=None, description="Soft slicing of matching Ascend nodes through HAMi."
    )
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec,
        description="Used when a change disrupts running pods (a backend switch).",
    )


class SharingPolicyStatus(ApiModel):
    observed_generation: int = Field(default=0, description="The generation this status describes.")
    config_key: str = Field(default="", description="Key of this policy's device-plugin config.")
    nodes: NodeSummary = Field(default_factory=NodeSummary, description="Nodes by state.")
    advertised: dict[str, str] = Field(
        default_factory=dict, description="Resources the governed nodes advertise, summed."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling, Stalled.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
