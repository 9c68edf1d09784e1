"""Raw Kubernetes objects → the values the domain decides on, for the operator and for previews.

The controllers read Nodes, Pods, PDBs and ConfigMaps from the API server;
``tessera plan`` reads the same objects from the API server or from a
snapshot file. Both turn them into rollout views and pool targets here, so a
preview computes exactly what the next reconcile would (the plan hash
``tessera plan`` prints is the one the operator writes to ``status.plan.hash``).
Pure: objects in, frozen values out; nothing here reads the API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain import rollout
from tessera.domain.base import selectors
from tessera.domain.cluster import claims as pool_claims
from tessera.domain.cluster import pools
from tessera.domain.rollout import holders
from tessera.domain.rollout.machine import reads_pods
from tessera.domain.rollout.targets import at_target
from tessera.domain.sharing import nodes as node_facts
from tessera.domain.sharing import parsing

Raw = Mapping[str, Any]
NPG_KIND = "NodePoolGeometry"


# -- rollout views -------------------------------------------------------------------------------


def node_view(node: Raw) -> rollout.NodeView:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    annotations = meta.get("annotations") or {}
    state, error = None, ""
    raw = annotations.get(c.NODE_STATE_ANNOTATION)
    if raw:
        try:
            state = rollout.decode(raw)
        except rollout.StateError as err:
            error = str(err)
    record, record_error = None, ""
    try:
        record = holders.decode(annotations.get(c.GPU_HOLDERS_ANNOTATION))
    except holders.HoldersError as err:
        record_error = f"{c.GPU_HOLDERS_ANNOTATION}: {err}"
    ready = any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in status.get("conditions") or []
    )
    return rollout.NodeView(
        name=meta["name"],
        labels=meta.get("labels") or {},
        annotations=annotations,
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        allocatable=allocatable_of(node),
        taints=tuple(
            rollout.Taint(t["key"], t.get("effect", "NoSchedule"), t.get("value", ""))
            for t in spec.get("taints") or []
        ),
        state=state,
        state_error=error,
        holders=record,
        holders_error=record_error,
    )


def allocatable_of(node: Raw) -> dict[str, int]:
    """Integer allocatable only (devices); ``cpu: 64`` is kept, ``memory: 512Gi`` is not."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: int(v) for k, v in alloc.items() if str(v).isdigit()}


def pod_view(pod: Raw) -> rollout.PodView:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    owners = meta.get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), None)
    wants: set[str] = set()
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        resources = container.get("resources") or {}
        wants |= set(resources.get("limits") or {}) | set(resources.get("requests") or {})
    deletion = meta.get("deletionTimestamp")
    return rollout.PodView(
        namespace=meta["namespace"],
        name=meta["name"],
        node=spec.get("nodeName", ""),
        labels=meta.get("labels") or {},
        owner_kind=controller.get("kind") if controller else None,
        is_mirror="kubernetes.io/config.mirror" in (meta.get("annotations") or {}),
        requests_accelerator=any(w.startswith(c.ACCELERATOR_RESOURCE_PREFIXES) for w in wants),
        uses_empty_dir=any("emptyDir" in v for v in spec.get("volumes") or []),
        deletion_timestamp=datetime.fromisoformat(deletion.replace("Z", "+00:00"))
        if deletion
        else None,
        phase=status.get("phase", "Pending"),
        uid=meta.get("uid", ""),
        requests=accelerator_requests(spec),
        node_selector=spec.get("nodeSelector") or {},
        tolerations=tuple(
            rollout.Toleration(
                t.get("key", ""),
                t.get("operator", "Equal"),
                t.get("value", ""),
                t.get("effect", ""),
            )
            for t in spec.get("tolerations") or []
        ),
        claims=claim_names(spec, status),
        created=_time(meta.get("creationTimestamp")),
    )


def _time(raw: object) -> datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def claim_names(spec: Raw, status: Raw) -> tuple[str, ...]:
    """The ResourceClaims a pod uses: named in its spec, or made from a template (status)."""
    named = [r.get("resourceClaimName") for r in spec.get("resourceClaims") or []]
    made = [s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []]
    return tuple(sorted({n for n in (*named, *made) if isinstance(n, str) and n}))


def accelerator_requests(spec: Raw) -> dict[str, int]:
    """What the scheduler reserves for the pod, accelerators only: the larger of the containers'
    sum and any one init container; an extended resource's request is its limit when unset."""

    def of(container: Raw) -> dict[str, int]:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {
            r: int(v)
            for r, v in asked.items()
            if r.startswith(c.ACCELERATOR_RESOURCE_PREFIXES) and str(v).isdigit()
        }

    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for r, n in of(container).items():
            total[r] = total.get(r, 0) + n
    for container in spec.get("initContainers") or []:
        for r, n in of(container).items():
            total[r] = max(total.get(r, 0), n)
    return {r: n for r, n in total.items() if n > 0}


def pdb_view(pdb: Raw) -> rollout.PdbView:
    meta, spec, status = pdb["metadata"], pdb.get("spec") or {}, pdb.get("status") or {}
    selector = spec.get("selector")
    fresh = status.get("observedGeneration", -1) >= meta.get("generation", 0)
    return rollout.PdbView(
        namespace=meta["namespace"],
        name=meta["name"],
        selector=LabelSelector.model_validate(selector) if selector is not None else None,
        disruptions_allowed=int(status.get("disruptionsAllowed", 0)) if fresh else 0,
    )


@dataclass(frozen=True)
class PodReads:
    """Whose pods a rollout pass reads, by how fresh they must be."""

    fresh: tuple[str, ...]
    """In flight, and the step drains or recounts: list them now, after the cordon was seen."""
    ranked: tuple[str, ...]
    """Waiting for a slot: their pods only rank and pre-check them, a cache will do."""


def pod_reads(
    nodes: Sequence[rollout.NodeView], desired: Mapping[str, rollout.DesiredNode]
) -> PodReads:
    fresh, ranked = [], []
    for node in nodes:
        want, state = desired.get(node.name), node.state
        if state is not None:
            if reads_pods(node, state, want):
                fresh.append(node.name)
        elif want is not None and not want.invalid and not at_target(node, want):
            ranked.append(node.name)
    return PodReads(tuple(fresh), tuple(ranked))


def needs_pods(
    nodes: Sequence[rollout.NodeView], desired: Mapping[str, rollout.DesiredNode]
) -> list[str]:
    """Every node whose pods the plan may look at."""
    reads = pod_reads(nodes, desired)
    return sorted(reads.fresh + reads.ranked)


def sharing_facts(node: Raw) -> node_facts.NodeFacts:
    """The node as the sharing rules see it; NPUs are physical cards, even under HAMi."""
    meta = node["metadata"]
    annotations = meta.get("annotations") or {}
    alloc = (node.get("status") or {}).get("allocatable") or {}
    npu = next((k for k in sorted(alloc) if k.startswith("huawei.com/Ascend")), None)
    count = str(alloc.get(npu, "0")) if npu else "0"
    return node_facts.from_node(
        meta["name"],
        meta.get("labels") or {},
        annotations,
        npus=node_facts.physical_npus(annotations, npu, int(count) if count.isdigit() else 0),
        npu_resource=npu,
        allocatable={
            k: int(str(v)) if str(v).isdigit() else 0
            for k, v in alloc.items()
            if k.startswith(c.ACCELERATOR_RESOURCE_PREFIXES)
        },
    )


# -- NodePoolGeometry ----------------------------------------------------------------------------


def geometry_owner(name: str) -> str:
    return f"{NPG_KIND}/{name}"


@dataclass(frozen=True)
class PoolObservation:
    """One NodePoolGeometry's view of the cluster, before pods are read."""

    owner: str
    views: Mapping[str, rollout.NodeView]  # every node, physical allocatable
    targets: Mapping[str, pools.NodeTarget]  # pool members only
    involved: tuple[rollout.NodeView, ...]  # members + nodes still carrying this pool's state
    claims: pool_claims.Claims = field(default_factory=pool_claims.Claims)  # one node, one pool

    @property
    def desired(self) -> dict[str, rollout.DesiredNode]:
        return {node: t.desired for node, t in self.targets.items()}


def pool_view(node: Raw, sharing: Mapping[str, Any]) -> rollout.NodeView:
    """The node with its allocatable as whole devices (its sharing config undone)."""
    view = node_view(node)
    key = view.labels.get(c.DEVICE_PLUGIN_CONFIG_LABEL)
    if key and key in sharing:
        config, _ = parsing.parse(sharing[key])
        view = replace(view, allocatable=pools.physical_allocatable(view.allocatable, config))
    return view


def touched_by(view: rollout.NodeView, owner: str) -> bool:
    """``owner`` left something on the node: its record, its taint, its queue mark."""
    return view.held_by(owner) or view.queued_by(owner)


def pools_reading(node: Raw, pools: Mapping[str, LabelSelector | None]) -> set[str]:
    """The NodePoolGeometries (name → nodeSelector) whose pass reads ``node``.

    A pool reads the nodes its selector matches and the nodes it holds (its
    rollout state or its pending taint), so only those pools need waking when
    the node changes; with several pools, the others would pass for nothing.
    """
    view = node_view(node)
    return {
        name
        for name, selector in pools.items()
        if selectors.matches(selector, view.labels) or touched_by(view, geometry_owner(name))
    }


def observe_pool(
    name: str,
    spec: NodePoolGeometrySpec,
    nodes: Iterable[Raw],
    sharing: Mapping[str, Any],
    others: Mapping[str, LabelSelector | None] | None = None,
    mig_configs: Mapping[str, Any] | None = None,
) -> PoolObservation:
    """Members, their targets and every node the rollout must see; ``sharing`` is the
    device-plugin ConfigMap's data, ``others`` the other pools' nodeSelectors: a node
    another pool keeps (``pool_claims``) is no member. ``mig_configs``: mig-parted's
    ``mig-configs``, which say what each node runs now, GPU by GPU (``pools.current_layout``)."""
    owner = geometry_owner(name)
    views = {n["metadata"]["name"]: pool_view(n, sharing) for n in nodes}
    claims = pool_claims.resolve({**(others or {}), name: spec.node_selector}, views.values())
    foreign = claims.foreign(name)
    members = (
        (node, v.labels, v.allocatable)
        for node, v in views.items()
        if selectors.matches(spec.node_selector, v.labels) and node not in foreign
    )
    targets = pools.targets_for(name, spec, members)
    involved = tuple(v for v in views.values() if v.name in targets or touched_by(v, owner))
    if mig_configs:
        involved = _with_layouts(involved, targets, mig_configs)
    return PoolObservation(owner, views, targets, involved, claims)


def _with_layouts(
    views: Sequence[rollout.NodeView],
    targets: Mapping[str, pools.NodeTarget],
    configs: Mapping[str, Any],
) -> tuple[rollout.NodeView, ...]:
    """The members a change can take GPU by GPU, with the layout each runs now; nodes alike
    (config, its state, GPU count) share one reading of their config."""
    known: dict[tuple[str | None, ...], Any] = {}
    out = []
    for v in views:
        t = targets.get(v.name)
        if t is None or t.desired.layout is None:
            out.append(v)
            continue
        key = tuple(v.labels.get(k) for k in _LAYOUT_KEYS)
        if key not in known:
            known[key] = pools.current_layout(v.labels, configs)
        out.append(replace(v, layout=known[key]))
    return tuple(out)


_LAYOUT_KEYS = (c.MIG_CONFIG_LABEL, c.MIG_CONFIG_STATE_LABEL, c.GPU_COUNT_LABEL)


def pool_configs(
    spec: NodePoolGeometrySpec, seen: PoolObservation
) -> tuple[dict[str, list[dict[str, Any]]], set[str]]:
    """(configs the pool wants, configs to keep): what the agent ConfigMap must hold.

    Kept are the configs a node still names and those a rollout in flight may
    apply or roll back to, so no label ever points at a missing config.
    """
    wanted = {t.config[0]: t.config[1] for t in seen.targets.values() if t.config is not None}
    label = pools.config_label(spec)
    keep: set[str] = {v.labels[label] for v in seen.involved if label in v.labels}
    for v in seen.involved:
        if v.state is not None:
            for target in (v.state.target, v.state.last_good):
                config = (target.labels if target else {}).get(label)
                if config:
                    keep.add(config)
    return wanted, keep
