"""The scheduler side of a SharingPolicy: HAMi's device config, Volcano's deviceshare plugin.

HAMi slices are allocated by a scheduler that reads its own config: HAMi's
``hami-scheduler-device`` map, or Volcano's ``volcano-scheduler.conf`` whose
``deviceshare`` plugin points at a map of known geometries. The formats differ
by version, so each component's version is declared or read from its image tag.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from tessera.api.v1alpha1.common import ApiModel, cel, validations

VOLCANO_BLOCK = "spec.scheduler.volcano must be set exactly when scheduler name is Volcano"
FOR_HAMI = "spec.scheduler is for HAMi slices: backend HAMiCore or spec.ascend"
NOT_DRA = "spec.scheduler and spec.dra are exclusive: DRA claims are allocated by kube-scheduler"
MINDCLUSTER_VOLCANO = (
    "spec.ascend.mode MindCluster is Volcano's deviceshare plugin (AscendMindClusterVNPUEnable): "
    "set spec.scheduler {name: Volcano, volcano: {}}"
)
VCANNRT_VOLCANO = (
    "spec.ascend.mode VCannRT is scheduled by Volcano alone (Huawei's Volcano plugin, policy "
    "chip1-softShareDev): set spec.scheduler {name: Volcano, volcano: {}} so the pod contract "
    "is enforced"
)
VERSION_PATTERN = r"^v?[0-9]+\.[0-9]+(\.[0-9]+)?$"


class ObjectRef(ApiModel):
    namespace: str = Field(min_length=1, max_length=63, description="Namespace of the object.")
    name: str = Field(min_length=1, max_length=253, description="Name of the object.")


def _ref(namespace: str, name: str, what: str) -> Any:
    return Field(
        default_factory=lambda: ObjectRef(namespace=namespace, name=name),
        description=f"{what} (default {namespace}/{name}).",
    )


class HamiScheduler(ApiModel):
    version: str | None = Field(
        default=None,
        pattern=VERSION_PATTERN,
        description="HAMi's version, e.g. v2.10.0. Omitted: read from the image tag of the "
        "scheduler Deployment. It decides the format Tessera writes (vnpus as a list up to "
        "v2.8, as {hamiVnpuCore, configs} from v2.9).",
    )
    config_map: ObjectRef = _ref(
        "kube-system", "hami-scheduler-device", "HAMi's device config (key device-config.yaml)"
    )
    deployment: ObjectRef = _ref("kube-system", "hami-scheduler", "HAMi's scheduler Deployment")


class VolcanoScheduler(ApiModel):
    version: str | None = Field(
        default=None,
        pattern=VERSION_PATTERN,
        description="Volcano's version, e.g. v1.16.0. Omitted: read from the image tag of the "
        "scheduler Deployment. Volcano up to v1.15 reads vnpus only as a list and has no "
        "hami-core mode.",
    )
    config_map: ObjectRef = _ref(
        "volcano-system",
        "volcano-scheduler-configmap",
        "Volcano's scheduler config (key volcano-scheduler.conf); Tessera edits only the "
        "deviceshare plugin's arguments",
    )
    deployment: ObjectRef = _ref(
        "volcano-system", "volcano-scheduler", "Volcano's scheduler Deployment"
    )
    policy: Literal["binpack", "spread"] = Field(
        default="binpack", description="deviceshare.SchedulePolicy: pack slices or spread them."
    )
    weight: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="deviceshare.ScheduleWeight; 0 or absent skips device-level node scoring.",
    )
    restart: Literal["Manual", "Automatic"] = Field(
        default="Manual",
        description="Volcano reads the device config once at start. Automatic: Tessera restarts "
        "the scheduler as kubectl rollout restart does, once per change, with an Event. "
        "Manual: the condition says a restart is pending until the scheduler's pods are newer "
        "than the change.",
    )


class SchedulerSpec(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "has(self.volcano) == (self.name == 'Volcano')",
                VOLCANO_BLOCK,
                ".volcano",
            ),
        )
    )

    name: Literal["HAMi", "Volcano"] = Field(
        description="The scheduler that allocates this policy's slices: HAMi's scheduler "
        "(hami-scheduler) or Volcano's with its deviceshare plugin."
    )
    hami: HamiScheduler = Field(
        default_factory=HamiScheduler,
        description="HAMi's device config, read by HAMi's scheduler and device plugins (also "
        "when Volcano schedules).",
    )
    volcano: VolcanoScheduler | None = Field(
        default=None, description="Volcano's scheduler, for name Volcano."
    )
    pod_contract: Literal["Warn", "Deny", "Off"] = Field(
        default="Warn",
        description="A ValidatingAdmissionPolicy Tessera writes for this policy: pods that "
        "request its sliced resources without the annotation, runtime class or scheduler name "
        "the chain needs are warned (Warn) or refused (Deny), with a message naming the "
        "missing piece. Off writes none.",
    )


class SchedulerStatus(ApiModel):
    name: str = Field(default="", description="HAMi or Volcano.")
    versions: dict[str, str] = Field(
        default_factory=dict,
        description="Versions the written formats follow, by component (hami, volcano), "
        'each as "v1.15.0 (image)" or "v1.16.0 (declared)".',
    )
    config_maps: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="The ConfigMaps (namespace/name) whose Tessera-owned parts match this policy.",
    )
    admission_policy: str = Field(
        default="", description="The ValidatingAdmissionPolicy guarding the pod contract."
    )
    restart_pending: bool = Field(
        default=False,
        description="The scheduler (Volcano, or HAMi's) has not restarted since its device "
        "config changed.",
    )
