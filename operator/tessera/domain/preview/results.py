"""What a preview says: per object an ``ObjectPreview`` (its node changes, and for an object
``tessera plan --prune`` deletes, the ``Deletion`` its finalizer runs), the tenants whose quota
it overcommits, and the agent ConfigMaps as unified diffs — the whole being a ``Preview``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field

from tessera.domain.preview.model import ObjectAction


@dataclass(frozen=True)
class GpuChange:
    """One GPU a MIG change repartitions: its index, and its layout now and next."""

    index: int
    before: str
    after: str


@dataclass(frozen=True)
class NodeChange:
    node: str
    before: str
    after: str
    disruptive: bool
    evicts: tuple[str, ...] = ()  # namespace/name of the pods drained first
    note: str = ""  # why it waits, or why it cannot happen
    migrates: tuple[str, ...] = ()  # VMs (namespace/name) among them: virt-launcher pods
    scope: str = ""
    """NodePoolGeometry: how much of the node the change takes (``rollout.scope``):
    ``GPUs 0-3 change (0-3: whole GPU -> 2x3g.40gb); 4 pods move, 4 stay`` or
    ``whole node: <why>; 8 pods move``; "" where changes always take the whole node."""
    gpus: tuple[GpuChange, ...] = ()  # the GPUs repartitioned, when only those are
    stays: tuple[str, ...] = ()  # namespace/name of the pods that keep running on the node


@dataclass(frozen=True)
class Release:
    """A node the deleted object still holds, and what its finalizer writes to it."""

    node: str
    holds: tuple[str, ...]  # what ties the node to the object now
    then: tuple[str, ...] = ()  # the finalizer's writes, in order
    waits: str = ""  # what happens before those writes (a layout being verified finishes)
    warnings: tuple[str, ...] = ()  # what the finalizer leaves for a person


@dataclass(frozen=True)
class RemovedQuota:
    namespace: str
    name: str
    hard: Mapping[str, int] = field(default_factory=dict)  # requests.<resource> it enforced
    used: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Deletion:
    """What deleting one object does, beyond ``ObjectPreview.changes`` and ``writes``."""

    released: tuple[Release, ...] = ()  # NodePoolGeometry, SharingPolicy
    kept: Mapping[str, str] = field(default_factory=dict)  # node -> layout it keeps
    hami: tuple[str, ...] = ()  # nodes whose Tessera fields leave HAMi's node config
    quotas: tuple[RemovedQuota, ...] = ()  # TenantQuota
    unenforced: Mapping[str, int] = field(default_factory=dict)  # spec.total no longer held
    effects: tuple[str, ...] = ()  # one sentence each


@dataclass(frozen=True)
class ClassChange:
    """A DeviceClass Tessera would create, update or delete."""

    name: str
    action: ObjectAction
    selects: str = ""  # "gpu" or a MIG profile; empty for a delete
    declared_by: tuple[str, ...] = ()
    says: str = ""  # what it selects and its sharing config, in words


@dataclass(frozen=True)
class AdmissionChange:
    """A pod contract's ValidatingAdmissionPolicy or binding Tessera would write."""

    kind: str
    name: str
    action: ObjectAction
    says: str = ""  # Warn or Deny, and what pods must carry


@dataclass(frozen=True)
class ObjectPreview:
    """One manifest: its object-level change and, for pools, what happens on the nodes."""

    kind: str
    name: str
    action: ObjectAction
    nodes_total: int = 0
    changes: tuple[NodeChange, ...] = ()
    pods_to_evict: int = 0
    blocking_pdbs: tuple[str, ...] = ()
    plan_hash: str = ""  # what the operator writes to status.plan.hash (rollouts only)
    approval: str = ""  # Automatic | Manual, for rollouts
    approved: bool = False
    capacity_before: Mapping[str, int] = field(default_factory=dict)
    capacity_after: Mapping[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()  # NodePoolGeometry: nodes another pool selects (exit 1)
    writes: tuple[str, ...] = ()  # other writes (ResourceQuotas), one sentence each
    deletion: Deletion | None = None  # action "delete": what its finalizer does
    devices: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """DRA pools: per DeviceClass, devices in the nodes' ResourceSlices now -> once applied."""
    autopilot: str = ""
    """NodePoolGeometry: the choice in ``status.autopilot`` the plan targets, with its reason."""


@dataclass(frozen=True)
class TenantImpact:
    tenant: str
    before: bool  # Overcommitted now
    after: bool  # Overcommitted once applied
    message: str


@dataclass(frozen=True)
class ConfigDiff:
    where: str  # namespace/name key
    diff: str  # unified diff, live → planned


@dataclass(frozen=True)
class Preview:
    objects: tuple[ObjectPreview, ...] = ()
    tenants: tuple[TenantImpact, ...] = ()
    capacity: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # changed only
    configs: tuple[ConfigDiff, ...] = ()
    notes: tuple[str, ...] = ()
    device_classes: tuple[ClassChange, ...] = ()
    class_conflicts: tuple[str, ...] = ()  # a wanted DeviceClass name Tessera does not own
    admission: tuple[AdmissionChange, ...] = ()  # pod contracts written
    admission_conflicts: tuple[str, ...] = ()  # a wanted pod-contract name Tessera does not own

    @property
    def conflicts(self) -> tuple[str, ...]:
        """Pools that would select the same nodes, or declare a DeviceClass someone else
        owns: an error, the plan cannot be applied."""
        pools = tuple(f"{o.kind}/{o.name}: {c}" for o in self.objects for c in o.conflicts)
        return (*pools, *self.class_conflicts, *self.admission_conflicts)

    @property
    def changed(self) -> bool:
        return bool(
            self.configs
            or self.device_classes
            or self.admission
            or any(o.action != "unchanged" or o.changes or o.writes for o in self.objects)
        )


def unified(where: str, old: str, new: str) -> ConfigDiff | None:
    """``old`` -> ``new`` as a unified diff headed ``where`` (live, planned); None if equal."""
    if old == new:
        return None
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"{where} (live)",
        tofile=f"{where} (planned)",
    )
    return ConfigDiff(
        where, "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    )
