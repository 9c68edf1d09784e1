"""What the rollout engine observes: small frozen snapshots of Nodes, Pods and PDBs.

The controller builds these from its cache once per reconcile and hands them to
``planning.plan``. Keeping them tiny and immutable is what lets the engine stay
pure and lets tests build a whole cluster in a few lines (see the builders in
``tests/unit/rollout/rollout_builders.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from tessera.api import constants
from tessera.api.v1alpha1.common import LabelSelector
from tessera.domain.dra.naming import DRIVER, SUFFIX
from tessera.domain.rollout.holders import Holders
from tessera.domain.rollout.state import NodeState

Layout = tuple[tuple[tuple[str, int], ...], ...]
"""One node's layout per GPU index: the (profile, count) pairs of each GPU, () for a whole GPU."""

# What a rollout sees of a DRA node: the devices its ResourceSlices publish, its plugin pod.
# A pool with ``allocation: DRA`` is verified against the NVIDIA DRA driver's ResourceSlices
# instead of allocatable, and the driver's kubelet plugin is restarted after a MIG change,
# since it enumerates static MIG devices only when it starts. The controller fills
# ``NodeView.dra`` for such pools; the engine only reads it.


@dataclass(frozen=True)
class PluginPod:
    """The driver's kubelet-plugin pod on one node (the pool's DaemonSet's)."""

    namespace: str
    name: str
    uid: str
    terminating: bool = False
    ready: bool = True

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class DraNode:
    """One node as the DRA driver publishes it.

    ``devices``: ``"gpu"`` or MIG profile → count, from the node's pool (pool name = node)
    of driver ``gpu.nvidia.com`` at its highest generation, when that generation is
    complete; ``None`` when there is no complete pool. ``plugins``: the kubelet-plugin
    pods of each DaemonSet (``<namespace>/<daemonSet>``) the controller looked for.
    """

    devices: Mapping[str, int] | None = None
    plugins: Mapping[str, tuple[PluginPod, ...]] = field(default_factory=dict)

    def plugin_pods(self, daemon_set: str) -> tuple[PluginPod, ...]:
        return self.plugins.get(daemon_set, ())


def counts_text(counts: Mapping[str, int] | None) -> str:
    """``{1g.10gb: 7, gpu: 1}``, or that the node has no complete pool."""
    if counts is None:
        return "no complete ResourceSlice pool"
    inner = ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()) if n)
    return "{" + inner + "}"


UNPUBLISHED = f"{DRIVER} devices no ResourceSlice lists"
"""What the room check counts a held device as when no slice says its kind: no node offers
it, so a pod holding one is reported with nowhere to go rather than assumed to fit."""


def counted(resource: str) -> bool:
    """Whether the room check counts ``resource``: a DRA device (Tessera's DeviceClass of
    its kind, ``naming.geometry_class``) or ``UNPUBLISHED``; extended resources are
    ``capacity``'s own rule."""
    return resource.endswith(SUFFIX) or resource == UNPUBLISHED


PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str = "NoSchedule"
    value: str = ""


GEOMETRY_PENDING = Taint(constants.GEOMETRY_PENDING_TAINT, "NoSchedule")
"""Tessera's own scheduling block: we can always remove a taint we own without
overriding anyone else's intent, which ``spec.unschedulable`` cannot promise."""
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
"""A cordon as a taint: the node lifecycle controller mirrors ``spec.unschedulable`` into it."""


def pending_taint(owner: str) -> Taint:
    """``GEOMETRY_PENDING`` with its owner as the value, as earlier versions held idle nodes.

    Those versions tainted a node waiting for its first layout before any
    rollout state, so the taint alone said whose it was (otherwise every other
    pool saw an orphan and lifted it). Tessera no longer taints idle nodes, but
    it still reads the value, so each pool lifts only its own leftovers. A taint
    value is a label value (63 characters, no slash), hence the token.
    """
    return replace(GEOMETRY_PENDING, value=owner_token(owner))


QUEUED = Taint(constants.GEOMETRY_QUEUED_TAINT, "PreferNoSchedule")
"""On a node waiting for its turn while its pool rolls out (``queueing``): kube-scheduler
prefers the other nodes for new pods, so a pod evicted elsewhere is not placed where the
rollout drains it again. Never NoSchedule: a soft preference blocks no pool, and it does not
make the node unavailable (the budget does not count it)."""


def queued_taint(owner: str) -> Taint:
    return replace(QUEUED, value=owner_token(owner))


def owner_token(owner: str) -> str:
    """``owner`` as a taint value: a label value (63 characters, no slash)."""
    token = owner.replace("/", ".")
    if len(token) > 63:
        token = f"{token[:52]}.{hashlib.sha256(owner.encode()).hexdigest()[:10]}"
    return token


@dataclass(frozen=True)
class NodeView:
    """One Node as the engine needs it.

    ``state`` is the decoded ``tessera.io/rollout-state`` annotation (``None``
    when absent). When the annotation exists but cannot be read, ``state`` is
    ``None`` and ``state_error`` says why: the engine then never uncordons the
    node, because it no longer knows who cordoned it.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True
    allocatable: Mapping[str, int] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    state: NodeState | None = None
    state_error: str = ""
    dra: DraNode | None = None
    """Pools with ``allocation: DRA``: its ResourceSlices and kubelet-plugin pods."""
    layout: Layout | None = None
    """The layout the node runs, per GPU, when its agent reports success for a config whose
    entries say it (``migparted.layout_of``); None when that is not known."""
    holders: Holders | None = None
    """Who holds which GPU, as the GPU node agent published it (``holders``)."""
    holders_error: str = ""
    """Why the agent's record could not be read (then ``holders`` is None)."""

    def has_taint(self, taint: Taint) -> bool:
        return any(t.key == taint.key and t.effect == taint.effect for t in self.taints)

    def taint_value(self, taint: Taint) -> str | None:
        """The value of the node's taint with ``taint``'s key and effect; None without one."""
        found = [t.value for t in self.taints if t.key == taint.key and t.effect == taint.effect]
        return found[0] if found else None

    def held_by(self, owner: str) -> bool:
        """Whether ``owner`` holds this node: by its rollout state, or, with no state, by a
        pending taint carrying its name (or carrying no name: written before names were)."""
        if self.state is not None:
            return self.state.owner == owner
        value = self.taint_value(GEOMETRY_PENDING)
        return value is not None and value in ("", pending_taint(owner).value)

    def queued_by(self, owner: str) -> bool:
        """Whether ``owner``'s rollout queued this node (``QUEUED`` with its name)."""
        return self.taint_value(QUEUED) == owner_token(owner)


@dataclass(frozen=True, slots=True)
class Toleration:
    """One of a pod's tolerations (core/v1 semantics; an empty key with Exists tolerates all)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        return self.key == taint.key and (self.operator == "Exists" or self.value == taint.value)


@dataclass(frozen=True, slots=True)  # 50,000 of them in the pod index
class PodView:
    namespace: str
    name: str
    node: str
    labels: Mapping[str, str] = field(default_factory=dict)
    owner_kind: str | None = "ReplicaSet"
    is_mirror: bool = False
    requests_accelerator: bool = False
    uses_empty_dir: bool = False
    deletion_timestamp: datetime | None = None
    phase: PodPhase = "Running"
    uid: str = ""
    requests: Mapping[str, int] = field(default_factory=dict)
    """Accelerator resources the pod holds on its node (the scheduler's effective request)."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    claims: tuple[str, ...] = ()
    """Names of the ResourceClaims the pod uses (``status.resourceClaimStatuses``)."""
    created: datetime | None = None
    """``metadata.creationTimestamp``: a pod created at or after a holder record was read is
    not in it, whatever the record lists under its name."""

    @property
    def key(self) -> str:
        """Identity for bookkeeping: a pod replaced under the same name is a new pod."""
        base = f"{self.namespace}/{self.name}"
        return f"{base}@{self.uid}" if self.uid else base

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_daemonset(self) -> bool:
        return self.owner_kind == "DaemonSet"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True)
class PdbView:
    namespace: str
    name: str
    selector: LabelSelector | None
    """``None`` selects nothing; an empty selector selects every pod of the
    namespace (the policy/v1 semantics)."""
    disruptions_allowed: int

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class DesiredNode:
    """What one node of the pool should look like.

    ``labels`` are written when the node reaches Applying (a ``None`` value
    removes the label); ``watch_label`` is the agent's state label
    (``nvidia.com/mig.config.state``) or ``None`` when no agent reports back;
    ``expected_allocatable`` lists the resources the node must advertise once
    the layout is live (list a resource with 0 to require it gone). ``invalid``
    says why the layout is impossible on this node's model: such a node is
    never cordoned. A DRA node sets ``expected_devices`` (what its ResourceSlices must
    publish, ``DraNode``) and ``plugin`` (the kubelet plugin's ``<namespace>/<daemonSet>``)
    instead of ``expected_allocatable``.
    """

    target: str
    labels: Mapping[str, str | None] = field(default_factory=dict)
    watch_label: str | None = None
    expected_allocatable: Mapping[str, int] | None = None
    invalid: str = ""
    expected_devices: Mapping[str, int] | None = None
    plugin: str | None = None
    layout: Layout | None = None
    """The target's layout per GPU of this node, where a change can be made GPU by GPU
    (device-plugin MIG pools); None: a change takes the whole node."""
