"""NodePoolGeometry: the hard partitioning (MIG, Ascend vNPU, vGPU) of a pool of nodes."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from tessera.api.v1alpha1 import vgpu as vgpu_rules
from tessera.api.v1alpha1.autopilot import AUTOPILOT_RULE, AutopilotSpec, AutopilotStatus
from tessera.api.v1alpha1.common import (
    ApiModel,
    Condition,
    LabelSelector,
    NodeCounts,
    NodeProblem,
    NodeScope,
    RolloutPlan,
    RolloutSpec,
    cel,
    validations,
)
from tessera.api.v1alpha1.layouts import MigGeometry, MigLayout, VnpuGeometry, VnpuLayout
from tessera.api.v1alpha1.vgpu import VgpuGeometry, VgpuLayout


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


NOTHING_DECLARED = (
    "set one of spec.mig, spec.vnpu or spec.vgpu (or allocation: DRA): a pool without any "
    "declares no geometry; for whole GPUs, a mig layout with empty profiles"
)


class NodePoolGeometrySpec(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "has(self.mig) || has(self.vnpu) || has(self.vgpu) || has(self.dra) "
                "|| (has(self.allocation) && self.allocation == 'DRA')",
                NOTHING_DECLARED,
            ),
            cel(
                "!(has(self.mig) && has(self.vnpu))",
                "mig and vnpu are mutually exclusive: a pool is either NVIDIA or Ascend",
            ),
            cel(
                "!has(self.vgpu) || (!has(self.mig) && !has(self.vnpu))",
                vgpu_rules.VGPU_ALONE,
                ".vgpu",
            ),
            cel(
                "!has(self.vgpu) || !has(self.allocation) || self.allocation != 'DRA'",
                vgpu_rules.VGPU_NOT_DRA,
                ".allocation",
            ),
            cel(
                "!has(self.vgpu) || !has(self.rollout) || !has(self.rollout.drain) "
                "|| !has(self.rollout.drain.force) || !self.rollout.drain.force",
                vgpu_rules.VGPU_NO_FORCE,
                ".rollout.drain.force",
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
            AUTOPILOT_RULE,
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
        default=None,
        description="NVIDIA MIG layouts; a layout with empty profiles keeps its GPUs whole "
        "(MIG disabled). One of mig, vnpu or vgpu is required, unless allocation is DRA.",
    )
    vnpu: VnpuGeometry | None = Field(default=None, description="Ascend vNPU template layouts.")
    vgpu: VgpuGeometry | None = Field(
        default=None,
        description="NVIDIA vGPU layouts for VM nodes (nvidia.com/gpu.workload.config=vm-vgpu), "
        "applied by NVIDIA's vGPU Device Manager.",
    )
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
    autopilot: AutopilotSpec | None = Field(
        default=None,
        description="Bounds within which Tessera chooses the pool's MIG layouts from pending "
        "demand, repartitioning idle GPUs only; the choice is recorded in status.autopilot, "
        "the spec is never written (docs/autopilot.md).",
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
    scopes: list[NodeScope] = Field(
        default_factory=list,
        max_length=20,
        description="Nodes being changed now on a pool whose changes go GPU by GPU: the GPUs "
        "each change repartitions, or why the whole node is drained (at most 20).",
    )
    capacity: dict[str, str] = Field(
        default_factory=dict, description="What the pool advertises once updated, per resource."
    )
    device_classes: list[DeviceClassStatus] = Field(
        default_factory=list,
        max_length=64,
        description="For allocation DRA: the DeviceClasses this pool's geometry provides.",
    )
    autopilot: AutopilotStatus | None = Field(
        default=None,
        description="With spec.autopilot: the layouts Tessera chose within its bounds, the last "
        "decision and its reason, and today's reconfigurations per GPU.",
    )
    last_good_layout: str = Field(
        default="", description="Config name of the last layout that rolled out cleanly."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling, Stalled.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


__all__ = [
    "MigGeometry",
    "MigLayout",
    "NodePoolGeometrySpec",
    "NodePoolGeometryStatus",
    "VgpuGeometry",
    "VgpuLayout",
    "VnpuGeometry",
    "VnpuLayout",
]
