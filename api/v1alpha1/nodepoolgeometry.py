"""NodePoolGeometry: the hard partitioning (MIG, Ascend vNPU) of a pool of nodes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from . import devices as grammar
from .common import (
    MIG_PROFILE_PATTERN,
    VNPU_TEMPLATE_PATTERN,
    ApiModel,
    Condition,
    LabelSelector,
    NodeCounts,
    NodeProblem,
    RolloutPlan,
    RolloutSpec,
    cel,
    keys_matching,
    message_expression,
    validations,
)

Devices = Annotated[
    int | str,
    AfterValidator(grammar.validated),
    Field(
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            # integers are checked by the schema, whose error shows the value (CEL's shows none)
            "minimum": 0,
            "maximum": grammar.MAX_INDEX,
            "maxLength": grammar.MAX_LENGTH,
            **validations(message_expression(grammar.CEL_RULE, grammar.CEL_MESSAGE)),
        }
    ),
]


class MigLayout(ApiModel):
    devices: Devices = Field(
        default="all",
        description=f"Which GPUs of each node this layout applies to: {grammar.FORMS}; "
        '"all" is the default.',
    )
    profiles: dict[str, Annotated[int, Field(ge=1, le=7)]] = Field(
        default_factory=dict,
        description='MIG profile → instances per GPU, e.g. {"3g.40gb": 1, "1g.10gb": 2}. '
        "Empty disables MIG on these GPUs.",
        json_schema_extra=keys_matching(
            MIG_PROFILE_PATTERN, "MIG profile names look like 1g.10gb, 3g.40gb or 1g.10gb+me", 8
        ),
    )


class VnpuLayout(ApiModel):
    devices: Devices = Field(
        default="all",
        description=f"Which NPUs of each node this layout applies to: {grammar.FORMS}; "
        '"all" is the default.',
    )
    templates: dict[str, Annotated[int, Field(ge=1, le=16)]] = Field(
        default_factory=dict,
        description='Ascend vNPU template → instances per NPU, e.g. {"vir02": 2}. Empty = whole NPU.',
        json_schema_extra=keys_matching(
            VNPU_TEMPLATE_PATTERN,
            "vNPU template names look like vir01, vir04_3c or vir10_3c_16g",
            8,
        ),
    )


LAYOUTS_RULES = validations(
    cel(
        "self.layouts.filter(l, !has(l.devices) || "
        "(type(l.devices) == string && l.devices == 'all')).size() <= 1",
        "at most one layout may apply to devices: all",
        ".layouts",
    ),
    cel(grammar.LAYOUTS_RULE, grammar.LAYOUTS_MESSAGE, ".layouts"),
)


def _no_index_twice(layouts: list[MigLayout] | list[VnpuLayout]) -> None:
    problem = grammar.shared_message([layout.devices for layout in layouts])
    if problem:
        raise ValueError(problem)


class MigGeometry(ApiModel):
    model_config = ConfigDict(json_schema_extra=LAYOUTS_RULES)

    layouts: list[MigLayout] = Field(
        min_length=1,
        max_length=16,
        description="Layouts by device; a layout with explicit indexes overrides devices: all. "
        "No index may be named by two layouts.",
    )

    @model_validator(mode="after")
    def _indexes_named_once(self) -> MigGeometry:
        _no_index_twice(self.layouts)
        return self


class VnpuGeometry(ApiModel):
    model_config = ConfigDict(json_schema_extra=LAYOUTS_RULES)

    layouts: list[VnpuLayout] = Field(
        min_length=1,
        max_length=16,
        description="Layouts by device; a layout with explicit indexes overrides devices: all. "
        "No index may be named by two layouts.",
    )

    @model_validator(mode="after")
    def _indexes_named_once(self) -> VnpuGeometry:
        _no_index_twice(self.layouts)
        return self


class DraKubeletPlugin(ApiModel):
    namespace: str = Field(
        default="nvidia-dra-driver-gpu",
        min_length=1,
        max_length=63,
        description="Namespace of the NVIDIA DRA driver's kubelet-plugin DaemonSet.",
    )
    daemon_set: str = Field(
        default="nvidia-dra-driver-gpu-kubelet-plugin",
        min_length=1,
        max_length=253,
        description="Name of that DaemonSet. Its pod on a node is restarted after a MIG change, "
        "because the driver enumerates static MIG devices only when it starts.",
    )


class DraFeatureGates(ApiModel):
    time_slicing_settings: bool = Field(
        default=False,
        description="The driver's TimeSlicingSettings gate is on for this pool's kubelet plugin "
        "(needed by a time-slicing SharingPolicy; off in the driver by default).",
    )
    mps_support: bool = Field(
        default=False,
        description="The driver's MPSSupport gate is on for this pool's kubelet plugin "
        "(needed by an MPS SharingPolicy; off in the driver by default).",
    )


class DraPool(ApiModel):
    kubelet_plugin: DraKubeletPlugin = Field(
        default_factory=DraKubeletPlugin,
        description="Where the driver's kubelet plugin runs (restarted after a MIG change).",
    )
    feature_gates: DraFeatureGates = Field(
        default_factory=DraFeatureGates,
        description="Driver feature gates enabled on this pool's nodes; a SharingPolicy that "
        "needs a gate that is off is refused before anything is written.",
    )


class NodePoolGeometrySpec(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "!(has(self.mig) && has(self.vnpu))",
                "mig and vnpu are mutually exclusive: a pool is either NVIDIA or Ascend",
            ),
            cel(
                "!has(self.dra) || (has(self.allocation) && self.allocation == 'DRA')",
                "spec.dra applies only to a pool with allocation: DRA",
                ".dra",
            ),
            cel(
                "!has(self.allocation) || self.allocation != 'DRA' || !has(self.vnpu)",
                "allocation DRA is for NVIDIA GPUs (driver gpu.nvidia.com); an Ascend vnpu pool "
                "uses the device plugin",
                ".allocation",
            ),
            cel(
                "!has(self.allocation) || self.allocation != 'DRA' || !has(self.migStrategy) "
                "|| self.migStrategy == 'mixed'",
                "migStrategy single is a device-plugin setting; a DRA pool publishes every MIG "
                "device by profile",
                ".migStrategy",
            ),
        )
    )

    node_selector: LabelSelector = Field(
        description="The nodes of the pool. A node belongs to one pool only: a node several pools "
        "select stays with the pool that already holds it (its rollout, pending taint or layout is "
        "on the node) and is touched by no other; one that none of them holds is touched by none. "
        "A pool that selects a node it may not touch is Stalled (Conflict) and starts no node. "
        "A selector that matches no node is Stalled (NoNodes)."
    )
    mig: MigGeometry | None = Field(
        default=None, description="NVIDIA MIG layouts. Omit both mig and vnpu for whole GPUs."
    )
    vnpu: VnpuGeometry | None = Field(default=None, description="Ascend vNPU template layouts.")
    mig_strategy: Literal["single", "mixed"] = Field(
        default="mixed",
        description="How the device plugin advertises MIG devices: mixed (nvidia.com/mig-<profile>) "
        "or single (nvidia.com/gpu, one profile per node).",
    )
    allocation: Literal["DevicePlugin", "DRA"] = Field(
        default="DevicePlugin",
        description="How pods get this pool's devices. DevicePlugin: extended resources such as "
        "nvidia.com/mig-1g.10gb from the NVIDIA device plugin. DRA: ResourceClaims naming the "
        "DeviceClasses Tessera writes for the pool (status.deviceClasses), served by NVIDIA's "
        "DRA driver gpu.nvidia.com. A node runs one or the other, never both.",
    )
    dra: DraPool | None = Field(
        default=None, description="Settings of a pool with allocation: DRA (defaults if absent)."
    )
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec, description="How a change is rolled out over the pool."
    )


class DeviceClassStatus(ApiModel):
    name: str = Field(description="The DeviceClass (resource.k8s.io/v1) Tessera wrote.")
    selects: str = Field(
        description="What it selects: gpu (whole GPUs) or a MIG profile such as 1g.10gb."
    )
    devices: int = Field(
        default=0, description="Devices it selects in the pool's ResourceSlices now."
    )


class NodePoolGeometryStatus(ApiModel):
    observed_generation: int = Field(default=0, description="The generation this status describes.")
    plan: RolloutPlan | None = Field(default=None, description="What the current change does.")
    nodes: NodeCounts = Field(default_factory=NodeCounts, description="Nodes by rollout state.")
    problems: list[NodeProblem] = Field(
        default_factory=list, max_length=20, description="Nodes that need attention (at most 20)."
    )
    capacity: dict[str, str] = Field(
        default_factory=dict, description="What the pool advertises once updated, per resource."
    )
    device_classes: list[DeviceClassStatus] = Field(
        default_factory=list,
        max_length=64,
        description="For allocation DRA: the DeviceClasses this pool's geometry provides.",
    )
    last_good_layout: str = Field(
        default="", description="Config name of the last layout that rolled out cleanly."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling, Stalled.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
