"""The NodePoolGeometry part of a preview: the rollout the operator would start, node by node.

The pool is observed with ``cluster.objects.observe_pool`` and planned with
``rollout.plan``, exactly as the controller's next pass would — with the layouts its
autopilot recorded in ``status.autopilot`` in place of Git's while that choice applies
(``cluster.autopilot.effective``; the preview says so, with the choice's reason), the
nodes a pod now holds chosen GPUs of held (``cluster.autopilot_idle``), and the choice for
such a GPU withdrawn where the operator's pass withdraws it (``cluster.autopilot.withdrawal``,
the step's own function), so the plan shows what the operator rolls next — so the hash is
the one the operator writes to ``status.plan.hash`` and an ``approval:
Manual`` rollout can be approved from the reviewed preview. The agent
ConfigMap text comes from ``pools.configs_document``, as the controller
writes it, and is shown as a diff (``geometry_configs``). A DRA pool's nodes are seen
through the driver (its slices, its kubelet-plugin pods) and its ResourceClaims, as the
controller sees them, so its changes are scoped per GPU alike (``rollout.dra.claims``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain import rollout
from tessera.domain.cluster import autopilot as pilot
from tessera.domain.cluster import autopilot_idle as idle
from tessera.domain.cluster import claims as pool_claims
from tessera.domain.cluster import dra_view, empty_pools, pools
from tessera.domain.cluster import objects as observe
from tessera.domain.preview.geometry_configs import (
    current_configs,
    describe,
    diff,
    fold,
    unlabelled,
)
from tessera.domain.preview.model import Cluster, Locations, Raw, object_action
from tessera.domain.preview.results import ConfigDiff, GpuChange, NodeChange, ObjectPreview
from tessera.domain.rollout import scope, selection

KIND = "NodePoolGeometry"
VM_POD_LABEL, VM_POD_VALUE = "kubevirt.io", "virt-launcher"  # KubeVirt's pod of a running VM


@dataclass(frozen=True)
class GeometryPreviews:
    objects: tuple[ObjectPreview, ...]
    configs: tuple[ConfigDiff, ...]
    allocatable: Mapping[str, Mapping[str, int]]  # node -> physical devices once applied


def previews(
    before: Cluster, after: Cluster, manifests: Sequence[Raw], now: datetime, loc: Locations
) -> GeometryPreviews:
    plugin = (before.configmap(loc.device_plugin) or {}).get("data") or {}
    # what each node runs now, GPU by GPU, as the controller reads it: the live map
    mig_text = ((before.configmap(loc.mig) or {}).get("data") or {}).get(c.MIG_PARTED_CONFIGMAP_KEY)
    mig_configs = pools.configs_in(mig_text or "", "mig-configs")
    live = before.of_kind(KIND)
    claimants = pool_claims.claimants(after.of_kind(KIND).values())  # one node, one pool
    documents: dict[tuple[str, str], tuple[str, str]] = {}  # ConfigMap -> (key, text)
    objects: list[ObjectPreview] = []
    allocatable: dict[str, Mapping[str, int]] = {}
    for manifest in manifests:
        if manifest["kind"] != KIND:
            continue
        name = manifest["metadata"]["name"]
        obj = after.of_kind(KIND)[name]
        git = NodePoolGeometrySpec.model_validate(obj.get("spec") or {})
        last = pilot.recorded((live.get(name) or {}).get("status"))
        spec = pilot.effective(git, last)  # what the operator targets: Git's, or the choice
        seen = observe.observe_pool(name, spec, after.nodes, plugin, claimants, mig_configs)
        picked = pilot.chosen(git, last)
        preview, busy = _pool(before, after, obj, spec, seen, now, loc, bool(picked))
        if picked and last is not None:
            why = f"{last.outcome} at {last.decided_at}: {last.reason}"
            note = f"targets the choice in status.autopilot ({why})"
            out = pilot.withdrawal(picked, busy, seen)
            if out.gpus:  # as the operator's pass withdraws it, the plan hash it then writes
                last = last.model_copy(update={"layouts": list(out.layouts)})
                spec = pilot.effective(git, last)
                seen = observe.observe_pool(name, spec, after.nodes, plugin, claimants, mig_configs)
                preview, _ = _pool(before, after, obj, spec, seen, now, loc, True)
                gpus = ", ".join(str(i) for i in out.gpus)
                held = "; ".join(b.why for b in busy)
                note += f"; its choice for GPU {gpus} is withdrawn ({held}), the plan is the rest"
            preview = replace(preview, autopilot=note)
        claims = seen.claims.conflicts_of(name)
        said = tuple(f"Conflict: {c.message}" for c in claims)
        empty = () if seen.targets or said else (empty_pools.verdict(name, spec),)
        preview = replace(
            preview,
            problems=(*said, *(f"{v.reason}: {v.message}" for v in empty), *preview.problems),
            # exit 1 for a pool the conflict blocks; the pool that keeps its nodes goes on
            conflicts=tuple(m for c, m in zip(claims, said, strict=True) if not c.kept),
        )
        objects.append(replace(preview, action=object_action(KIND, live.get(name), manifest)))
        for node, target in seen.targets.items():
            if target.config is not None:
                allocatable[node] = target.capacity
        fold(before, spec, name, seen, loc, documents)
    diffs = tuple(
        d
        for (ns, cm), (key, text) in sorted(documents.items())
        if (d := diff(before, (ns, cm), key, text)) is not None
    )
    return GeometryPreviews(tuple(objects), diffs, allocatable)


def _pool(
    before: Cluster,
    after: Cluster,
    obj: Raw,
    spec: NodePoolGeometrySpec,
    seen: observe.PoolObservation,
    now: datetime,
    loc: Locations,
    chosen: bool = False,
) -> tuple[ObjectPreview, tuple[idle.Busy, ...]]:
    """The pool's preview, and while a choice is the target the nodes its recheck found busy."""
    name = obj["metadata"]["name"]
    on_dra = spec.allocation == "DRA"
    if on_dra:
        seen = dra_view.through_driver(seen, spec, after.slices, after.pods)
    desired = seen.desired
    wanted = set(observe.needs_pods(seen.involved, desired))
    pods = [
        observe.pod_view(p) for p in after.pods if (p.get("spec") or {}).get("nodeName") in wanted
    ]
    if on_dra and pods:
        seen, pods = dra_view.held(seen, pods, after.claims, after.slices, now)
    involved = list(seen.involved)
    pdbs = [observe.pdb_view(p) for p in after.pdbs] if pods else []
    approved = (obj["metadata"].get("annotations") or {}).get(c.APPROVE_PLAN_ANNOTATION)
    policy = pool_claims.policy(name, seen.claims, spec.rollout)
    room = rollout.room(map(observe.node_view, after.nodes), map(observe.pod_view, after.pods))
    busy = idle.recheck(seen.owner, desired, involved, pods, policy.drain) if chosen else ()
    plan = rollout.plan(
        seen.owner, policy, desired, involved, pods, pdbs, now, approved, room, hold=idle.hold(busy)
    )
    changes = _changes(before, spec, seen, plan, pods, loc)
    before_cap, after_cap = _capacity(seen)
    problems = tuple(f"{p.node}: {p.message}" for p in plan.problems)
    # Pods with nowhere to run hold the rollout back, as the operator would: said as a warning
    # line, but the manifests stay valid and still change the cluster, so the exit stays 2
    # ("changes"), not 1; 1 is for what cannot be applied (a conflict, a bad manifest).
    if plan.short_of_room:
        problems = (f"{rollout.capacity.REASON}: {plan.short_of_room}", *problems)
    preview = ObjectPreview(
        kind=KIND,
        name=name,
        action="unchanged",
        nodes_total=len(seen.targets),
        changes=changes,
        pods_to_evict=plan.summary.pods_to_evict,
        blocking_pdbs=tuple(plan.summary.blocking_pdbs),
        plan_hash=plan.hash,
        approval=spec.rollout.approval,
        approved=approved == plan.hash,
        capacity_before=dict(sorted(before_cap.items())),
        capacity_after=dict(sorted(after_cap.items())),
        problems=problems,
    )
    return preview, busy


def _changes(
    before: Cluster,
    spec: NodePoolGeometrySpec,
    seen: observe.PoolObservation,
    plan: rollout.Plan,
    pods: Sequence[rollout.PodView],
    loc: Locations,
) -> tuple[NodeChange, ...]:
    """Per node the plan changes: its layout now and next, the GPUs repartitioned and the
    pods that leave first (``rollout.scope``, as the rollout decides them), and those that
    stay."""
    configs = current_configs(before, spec, loc)
    label = pools.config_label(spec)
    drain = spec.rollout.drain
    by_node: dict[str, list[rollout.PodView]] = {}
    for pod in pods:
        by_node.setdefault(pod.node, []).append(pod)
    involved = {v.name: v for v in seen.involved}  # with the layout each runs now
    changes = []
    for report in sorted(plan.nodes, key=lambda r: r.name):
        if report.phase == rollout.ReportPhase.UPDATED:
            continue
        view = involved.get(report.name, seen.views[report.name])
        target = seen.targets[report.name]
        current = view.labels.get(label)
        was = describe(configs.get(current)) if current else unlabelled(spec)
        if current and current not in configs:
            was = current
        now_ = describe(target.config[1]) if target.config else "impossible"
        on_node = by_node.get(report.name, ())
        where = scope.planned(view, target.desired, on_node, drain, seen.owner)
        drained = scope.leaving(view, where, on_node, drain)
        gone = {p.ref for p in drained}
        stays = tuple(p.ref for p in selection.selected(on_node, drain) if p.ref not in gone)
        gpus = where.gpus or ()
        layouts = (view.layout, target.desired.layout, gpus)
        changes.append(
            NodeChange(
                report.name,
                was,
                now_,
                True,
                tuple(p.ref for p in drained),
                report.message,
                tuple(p.ref for p in drained if p.labels.get(VM_POD_LABEL) == VM_POD_VALUE),
                where.text(len(drained), len(stays), scope.moves(*layouts)),
                tuple(GpuChange(*t) for t in scope.transitions(*layouts)),
                stays,
            )
        )
    return tuple(changes)


def _capacity(seen: observe.PoolObservation) -> tuple[dict[str, int], dict[str, int]]:
    """The pool's accelerator allocatable now, and once every node runs its target."""
    before_cap: dict[str, int] = {}
    after_cap: dict[str, int] = {}
    for node, target in seen.targets.items():
        after_cap.update(dict.fromkeys(target.desired.expected_allocatable or {}, 0))
        for r, n in seen.views[node].allocatable.items():
            if r.startswith(c.ACCELERATOR_RESOURCE_PREFIXES):
                before_cap[r] = before_cap.get(r, 0) + n
    for target in seen.targets.values():
        for r, n in target.capacity.items():
            after_cap[r] = after_cap.get(r, 0) + n
    return before_cap, after_cap
