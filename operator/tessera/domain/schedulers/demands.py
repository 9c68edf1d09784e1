"""What the policies ask of the schedulers, gathered per scheduler config.

A scheduler's config is shared: every policy naming HAMi (or one Volcano) writes into the
same ConfigMap, so it is planned from all of them at once. ``PolicyDemand`` is one
policy's ask — its ``spec.scheduler``, the Ascend chips of the nodes it governs (catalog
names, a label no catalog chip answers to kept as read so a missing ``vnpus`` entry can be
reported), soft slicing, the NVIDIA HAMi-core settings, and the versions found for it.
``VolcanoDemand`` gathers the policies naming one Volcano scheduler config: what
``controllers.schedulers.volcano.sync`` receives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tessera.api import constants as c
from tessera.api.v1alpha1.scheduler import ObjectRef, SchedulerSpec, VolcanoScheduler
from tessera.api.v1alpha1.sharingpolicy import HamiCore, SharingPolicySpec
from tessera.domain.geometry.ascend import UnknownChipError, resolve_chip
from tessera.domain.schedulers.versions import Component, Detected


@dataclass(frozen=True, order=True)
class ObjectKey:
    """A namespaced object (a ConfigMap, a Deployment) as ``namespace/name``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of(cls, ref: ObjectRef) -> ObjectKey:
        return cls(ref.namespace, ref.name)


@dataclass(frozen=True)
class PolicyDemand:
    """One policy's ask of the scheduler side."""

    policy: str
    scheduler: SchedulerSpec
    chips: tuple[str, ...] = ()
    """Ascend chips of its nodes, sorted: catalog names (``310P3``), else the label as read."""
    soft_slicing: bool = False
    """``spec.ascend`` mode HAMiCore (``AscendSharing.soft``): HAMi's global ``hamiVnpuCore`` (Volcano: hami-core mode)."""
    hami_core: HamiCore | None = None
    """``spec.hamiCore`` where ``backend: HAMiCore``: the NVIDIA split and scalings."""
    versions: Mapping[Component, Detected] = field(default_factory=dict)
    """Versions found (declared or image) for the components it involves."""
    unknown: Mapping[Component, str] = field(default_factory=dict)
    """Components whose version could not be found, with the message saying why."""
    ascend: bool = False
    """It sets ``spec.ascend`` in a HAMi mode (so it has a say on ``hamiVnpuCore``)."""
    mindcluster: bool = False
    """``spec.ascend.mode`` MindCluster: Volcano's ``AscendMindClusterVNPUEnable`` and
    ``init-params`` ``presetVirtualDevice: "false"``; HAMi has no part in it."""
    vcannrt: bool = False
    """``spec.ascend.mode`` VCannRT: scheduled by Huawei's Volcano plugin, which Tessera does
    not configure; neither HAMi's device config nor Volcano's deviceshare has a part in it
    (``spec.scheduler`` serves its pod contract)."""

    @property
    def uses_hami(self) -> bool:
        """HAMi's device config has a part in this policy (any but MindCluster or vCANN-RT)."""
        return not self.mindcluster and not self.vcannrt

    @property
    def volcano(self) -> VolcanoScheduler:
        """``spec.scheduler.volcano``; only for a policy naming Volcano (CEL guarantees it)."""
        if self.scheduler.volcano is None:
            raise ValueError(f"SharingPolicy {self.policy} names {self.scheduler.name}")
        return self.scheduler.volcano

    @property
    def hami_config(self) -> ObjectKey:
        return ObjectKey.of(self.scheduler.hami.config_map)


@dataclass(frozen=True)
class VolcanoDemand:
    """The policies naming one Volcano scheduler config (``spec.scheduler.volcano.configMap``)."""

    config_map: ObjectKey
    policies: tuple[PolicyDemand, ...]
    """Empty for a config only a deleted policy named: Tessera's part of it is released."""
    deployments: Mapping[ObjectKey, Mapping[str, Any] | None] = field(default_factory=dict)
    """The Volcano Deployments these policies name, as read this pass (None: absent)."""


VolcanoDemands = Mapping[ObjectKey, VolcanoDemand]


def demand(
    policy: str,
    spec: SharingPolicySpec,
    scheduler: SchedulerSpec,
    node_labels: Iterable[Mapping[str, str]],
    versions: Mapping[Component, Detected] | None = None,
    unknown: Mapping[Component, str] | None = None,
) -> PolicyDemand:
    """The policy's ask from its spec (``scheduler`` is its ``spec.scheduler``) and the
    labels of the nodes it governs."""
    hami_core = spec.hami_core if spec.backend == "HAMiCore" else None
    soft = spec.ascend is not None and spec.ascend.soft
    found = dict(versions or {})
    missing = dict(unknown or {})
    chips = chips_of(node_labels)
    ascend = spec.ascend is not None and spec.ascend.hami
    mindcluster = spec.ascend is not None and spec.ascend.effective_mode == "MindCluster"
    vcannrt = spec.ascend is not None and spec.ascend.effective_mode == "VCannRT"
    return PolicyDemand(
        policy, scheduler, chips, soft, hami_core, found, missing, ascend, mindcluster, vcannrt
    )


def chips_of(node_labels: Iterable[Mapping[str, str]]) -> tuple[str, ...]:
    """The Ascend chips of these nodes (``node.kubernetes.io/npu.chip.name``), sorted."""
    out: set[str] = set()
    for labels in node_labels:
        raw = labels.get(c.NPU_CHIP_NAME_LABEL)
        if not raw:
            continue
        try:
            out.add(resolve_chip(raw).chip)
        except UnknownChipError:
            out.add(raw)
    return tuple(sorted(out))


def volcano_demands(
    demands: Iterable[PolicyDemand], released: Iterable[ObjectKey] = ()
) -> dict[ObjectKey, VolcanoDemand]:
    """The policies naming Volcano, by the scheduler config they name; a ``released`` config
    (named by a policy being deleted) that no other policy names comes with no policies:
    Tessera's part of it goes."""
    grouped: dict[ObjectKey, list[PolicyDemand]] = {key: [] for key in released}
    for one in demands:
        if one.scheduler.name == "Volcano" and not one.vcannrt:
            grouped.setdefault(ObjectKey.of(one.volcano.config_map), []).append(one)
    return {key: VolcanoDemand(key, tuple(ps)) for key, ps in sorted(grouped.items())}
