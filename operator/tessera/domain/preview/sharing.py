"""The SharingPolicy part of a preview: which nodes move to which config, in place or drained.

All policies are planned together with ``sharing.planning.plan``, as the
controller does, but with every node *cleared*: the preview shows where the
cluster ends up, and marks the disruptive moves, whose cordon/drain rollout
is planned with ``rollout.plan`` like ``controllers.sharing.rollout`` does (pods to
evict, blocking PDBs, the approval hash).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from datetime import datetime

from pydantic import ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain import rollout
from tessera.domain.cluster import objects as observe
from tessera.domain.preview.model import Cluster, Locations, Raw, object_action
from tessera.domain.preview.results import ConfigDiff, NodeChange, ObjectPreview
from tessera.domain.preview.sharing_configs import describe, describe_now, diffs
from tessera.domain.rollout import selection
from tessera.domain.sharing import observing, planning, rollout_targets
from tessera.domain.sharing.assignment import Assignment, Policy, assign
from tessera.domain.sharing.configmap import ConfigMapRef
from tessera.domain.sharing.nodes import NodeFacts
from tessera.domain.sharing.rendering import PolicyResult

KIND = "SharingPolicy"


@dataclass(frozen=True)
class SharingPreviews:
    objects: tuple[ObjectPreview, ...]
    configs: tuple[ConfigDiff, ...]
    facts: Mapping[str, NodeFacts]
    results: Mapping[str, PolicyResult | None]  # node -> the policy result that governs it
    changed: frozenset[str]
    plan: planning.SharingPlan  # every policy left once applied, every node cleared
    earlier: Assignment  # which policy governs each node now


def policies(objects: Cluster) -> list[Policy]:
    """The cluster's valid SharingPolicies, poolRefs resolved against its NodePoolGeometries."""
    pools = objects.of_kind("NodePoolGeometry")
    out = []
    for name, obj in sorted(objects.of_kind(KIND).items()):
        try:
            spec = SharingPolicySpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            continue
        selector, dra = None, False
        if spec.pool_ref is not None:
            pool = (pools.get(spec.pool_ref.name) or {}).get("spec") or {}
            raw, dra = pool.get("nodeSelector"), pool.get("allocation") == "DRA"
            selector = LabelSelector.model_validate(raw) if raw is not None else None
        out.append(Policy(name, spec, selector, dra))
    return out


def previews(
    before: Cluster, after: Cluster, manifests: Sequence[Raw], now: datetime, loc: Locations
) -> SharingPreviews:
    facts = {n["metadata"]["name"]: observe.sharing_facts(n) for n in after.nodes}
    plugin = before.configmap(loc.device_plugin)
    nv_cm = before.configmap((loc.hami_namespace, c.HAMI_NVIDIA_CONFIGMAP_NAME))
    asc_cm = before.configmap((loc.hami_namespace, c.HAMI_ASCEND_CONFIGMAP_NAME))
    nv = observing.hami_document(nv_cm, c.HAMI_NVIDIA_CONFIGMAP_KEY)
    asc = observing.hami_document(asc_cm, c.HAMI_ASCEND_CONFIGMAP_KEY)
    data = dict((plugin or {}).get("data") or {})
    seen = observing.sharing_observed(facts.values(), plugin, nv, asc)
    hns = loc.hami_namespace
    settings = planning.SharingSettings(
        plugin_map=ConfigMapRef(*loc.device_plugin),
        hami_nvidia_where=f"{hns}/{c.HAMI_NVIDIA_CONFIGMAP_NAME} ({c.HAMI_NVIDIA_CONFIGMAP_KEY})",
        hami_ascend_where=f"{hns}/{c.HAMI_ASCEND_CONFIGMAP_NAME} ({c.HAMI_ASCEND_CONFIGMAP_KEY})",
    )
    plan = planning.plan(policies(after), seen, settings, frozenset(facts))
    earlier = assign(policies(before), facts.values())
    live = before.of_kind(KIND)
    objects = []
    for manifest in manifests:
        if manifest["kind"] != KIND:
            continue
        name = manifest["metadata"]["name"]
        p = _policy(after, plan, earlier.owner, facts, data, name, now)
        objects.append(replace(p, action=object_action(KIND, live.get(name), manifest)))
    deleting = bool(live.keys() - after.of_kind(KIND).keys())
    touched = deleting or any(o.action != "unchanged" or o.changes for o in objects)
    configs: tuple[ConfigDiff, ...] = ()
    if touched:
        configs = diffs(plan, data, plugin, nv_cm, asc_cm, loc)
    results = {node: plan.results.get(owner) for node, owner in plan.assignment.owner.items()}
    return SharingPreviews(
        tuple(objects), configs, facts, results, frozenset(plan.changes), plan, earlier
    )


def _policy(
    after: Cluster,
    plan: planning.SharingPlan,
    earlier: Mapping[str, str],
    facts: Mapping[str, NodeFacts],
    data: Mapping[str, str],
    name: str,
    now: datetime,
) -> ObjectPreview:
    result = plan.results[name]
    obj = after.of_kind(KIND)[name]
    spec = SharingPolicySpec.model_validate(obj.get("spec") or {})
    governed = plan.assignment.nodes_of(name)
    mine = sorted(n for n in plan.changes if plan.assignment.owner.get(n, earlier.get(n)) == name)
    disruptive = [n for n in mine if plan.changes[n].disruptive and n in governed]
    approved = (obj["metadata"].get("annotations") or {}).get(c.APPROVE_PLAN_ANNOTATION)
    rolled: rollout.Plan | None = None
    evicts: dict[str, tuple[str, ...]] = {}
    if disruptive and result.valid:
        desired = {n: rollout_targets.desired_node(result, facts[n]) for n in disruptive}
        rolled, evicts = _rollout(after, name, spec, desired, set(governed), approved, now)
    changes = tuple(
        NodeChange(
            node,
            describe_now(facts[node], data),
            describe(result) if plan.assignment.owner.get(node) == name else "default",
            plan.changes[node].disruptive,
            evicts.get(node, ()),
            plan.changes[node].reason,
        )
        for node in mine
    )
    problems = [str(e) for e in (*result.errors, *result.node_errors)]
    problems += [conflict.message for conflict in plan.assignment.conflicts_of(name)]
    if rolled is not None and rolled.short_of_room:  # a warning on the pace: exit stays 2
        problems.append(f"{rollout.capacity.REASON}: {rolled.short_of_room}")
    pool = spec.pool_ref.name if spec.pool_ref is not None else None
    if pool is not None and pool not in after.of_kind("NodePoolGeometry"):  # as the controller
        problems.append(f"spec.poolRef: NodePoolGeometry {pool} does not exist (PoolNotFound)")
    return ObjectPreview(
        kind=KIND,
        name=name,
        action="unchanged",
        nodes_total=len(set(governed) | set(mine)),  # a node it gives up still counts
        changes=changes,
        pods_to_evict=rolled.summary.pods_to_evict if rolled else 0,
        blocking_pdbs=tuple(rolled.summary.blocking_pdbs) if rolled else (),
        plan_hash=rolled.hash if rolled else "",
        approval=spec.rollout.approval if rolled else "",
        approved=bool(rolled and approved == rolled.hash),
        problems=tuple(problems),
    )


def _rollout(
    after: Cluster,
    name: str,
    spec: SharingPolicySpec,
    desired: Mapping[str, rollout.DesiredNode],
    governed: Set[str],
    approved: str | None,
    now: datetime,
) -> tuple[rollout.Plan, dict[str, tuple[str, ...]]]:
    """The cordon/drain rollout of the nodes that move disruptively, as ``controllers.sharing.rollout``
    plans it, and per node the pods drained first. The policy's other nodes are bystanders:
    one unavailable holds the budget all the same."""
    views = [observe.node_view(n) for n in after.nodes if n["metadata"]["name"] in desired]
    bystanders = [
        observe.node_view(n)
        for n in after.nodes
        if n["metadata"]["name"] in governed and n["metadata"]["name"] not in desired
    ]
    pods = [
        observe.pod_view(p) for p in after.pods if (p.get("spec") or {}).get("nodeName") in desired
    ]
    pdbs = [observe.pdb_view(p) for p in after.pdbs]
    owner = rollout_targets.owner_id(name)
    room = rollout.room(map(observe.node_view, after.nodes), map(observe.pod_view, after.pods))
    rolled = rollout.plan(
        owner, spec.rollout, desired, views, pods, pdbs, now, approved, room, bystanders=bystanders
    )
    evicts = {}
    for node in desired:
        chosen = selection.selected([p for p in pods if p.node == node], spec.rollout.drain)
        evicts[node] = tuple(p.ref for p in chosen)
    return rolled, evicts
