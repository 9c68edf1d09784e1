"""NodePoolGeometry controller: observe the pool → plan with the rollout engine → apply → status.

Per pass: read the pool's Nodes (and any node still carrying this pool's
rollout state or taint) and the other pools' selectors — a node belongs to one
pool only, so a node another pool keeps, or several pools contest, is left
alone (``tessera.domain.cluster.claims``) —, derive each node's target from its GPU model or NPU
chip (``tessera.domain.cluster.pools``), make sure the agent ConfigMap holds every
config a node points at or may roll back to — written BEFORE any label names
it — then hand the observation to ``tessera.domain.rollout.plan`` and execute
its actions. Pods and PDBs are read only for nodes not yet at their target,
so a converged pool costs a Node list and a pool list and nothing else.

With ``spec.autopilot`` on, the pool is observed and rolled out with the layouts the
autopilot recorded in ``status.autopilot`` in place of ``spec.mig.layouts``
(``cluster.autopilot.effective``), and after the rollout the autopilot decides again
(``controllers.autopilot``): its choice goes to status, for the next pass to roll out.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
from collections.abc import Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError

from tessera.adapters.events import Ref
from tessera.adapters.kube import Obj, path_of
from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector, RolloutSpec
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.controllers import agent_configs, autopilot, skeleton, skipping
from tessera.controllers.dra import classes as dra_classes
from tessera.controllers.dra import pool as dra_pool
from tessera.controllers.dra import taints as dra_taints
from tessera.controllers.rollout import driver, evictions, recount
from tessera.controllers.runtime import Context, Result, custom_path, list_nodes, ref_of
from tessera.domain import rollout
from tessera.domain.base.conditions import Verdict, landed
from tessera.domain.cluster import autopilot as pilot
from tessera.domain.cluster import autopilot_idle as idle
from tessera.domain.cluster import claims as pool_claims
from tessera.domain.cluster import empty_pools, pools
from tessera.domain.cluster import objects as cluster
from tessera.domain.dra.slices import slice_pools
from tessera.domain.rollout.dra import taints as device_taints
from tessera.observability import metrics

PLURAL = "nodepoolgeometries"
KIND = "NodePoolGeometry"
log = logging.getLogger("tessera.nodepoolgeometry")
_KIND = skeleton.Kind(
    KIND,
    PLURAL,
    lambda obj: NodePoolGeometrySpec.model_validate(obj.get("spec") or {}),
    inputs=lambda ctx, obj: _inputs(ctx, obj),  # noqa: PLW0108 (defined below)
)


def owner_id(name: str) -> str:
    return cluster.geometry_owner(name)


def reconcile(ctx: Context, name: str) -> Result:
    with dra_pool.one_slice_list():  # the skip check and the pass share one slice list
        return skeleton.run(ctx, _KIND, name, _steps)


def _steps(ctx: Context, obj: Obj, git: NodePoolGeometrySpec) -> skeleton.PassOutcome:
    name = obj["metadata"]["name"]
    last = pilot.recorded(obj.get("status"))
    spec = pilot.effective(git, last)  # Git's layouts, or those the autopilot chose
    where = agent_configs.locate(ctx, spec)
    with ThreadPoolExecutor(4) as pool:  # four independent reads: wait for the slowest only
        listed = pool.submit(list_nodes, ctx)
        sharing = pool.submit(_sharing, ctx)
        configs = pool.submit(ctx.kube.get_or_none, where.path)
        others = pool.submit(_other_pools, ctx, name)
        nodes = listed.result()
        mig = (
            agent_configs.sections(where, configs.result())
            if where.section == "mig-configs"
            else {}
        )
        seen = cluster.observe_pool(name, spec, nodes, sharing.result(), others.result(), mig)
        # every pass: classes are shared by pools and policies; beside the rollout, not after
        classes = pool.submit(contextvars.copy_context().run, dra_classes.sync, ctx, nodes)
        dra = None
        if dra_pool.is_dra(spec):
            seen, dra = dra_pool.observe(ctx, spec, seen)
        agent_configs.ensure(ctx, where, name, spec, seen, configs.result())
        owners = {owner_id(n) for n in [name, *others.result()]}
        choosing = bool(pilot.chosen(git, last))
        plan, applied, tainted, busy = _roll(
            ctx, obj, spec, nodes, seen, dra, sharing.result(), owners, choosing
        )
        synced = classes.result()
    step = autopilot.decide(ctx, obj, git, last, seen, busy)
    verdict = landed(_verdict(name, spec, seen, plan), applied)
    if tainted is not None:
        verdict = tainted.report(verdict)
    status = _status(obj, plan, seen.targets)
    if step.status is not None:
        status["autopilot"] = step.status.model_dump(by_alias=True)
    if step.condition is not None:
        verdict = dataclasses.replace(verdict, extra=(*verdict.extra, step.condition))
    dra_classes.report(synced, dra_classes.declarer(KIND, name), on_dra=dra is not None)
    if dra is not None:  # the slices listed once, by observe
        verdict, status["deviceClasses"] = dra_classes.pool_part(
            synced, name, seen, verdict, dra.slices
        )
    else:
        verdict = synced.verdict(dra_classes.declarer(KIND, name)) or verdict
    metrics.export_rollout(KIND, name, plan)
    again = [t for t in (plan.requeue_after, step.requeue_after) if t is not None]
    result = Result(min(again, default=None), starved=bool(plan.short_of_room))
    if verdict.reason == dra_classes.WAITING_FOR_DRIVER:  # no watch wakes it on a slice: look
        soon = min(plan.requeue_after or ctx.settings.resync_seconds, ctx.settings.resync_seconds)
        result = Result(soon, starved=result.starved)
    return skeleton.PassOutcome(verdict, status, result)


def _roll(
    ctx: Context,
    obj: Obj,
    spec: NodePoolGeometrySpec,
    nodes: list[Obj],
    seen: cluster.PoolObservation,
    dra: dra_pool.DraObserved | None,
    sharing: Mapping[str, Any],
    owners: set[str],
    choosing: bool = False,
) -> tuple[rollout.Plan, bool, dra_taints.Synced | None, tuple[idle.Busy, ...]]:
    """Plan the rollout over the pool's nodes and apply it: the plan, whether it all
    landed, on a DRA pool the devices its DeviceTaintRules hold once it did
    (``controllers.dra.taints``: synced before the writes and after them), and, while an
    autopilot choice is the target (``choosing``), the nodes it would change that pods hold
    (``cluster.autopilot_idle``): those are held, never drained."""
    desired, involved = seen.desired, list(seen.involved)
    if dra is not None and cluster.needs_pods(involved, desired):
        dra = dra_pool.with_claims(ctx, dra)
    pods = driver.pods_for(ctx, involved, desired)
    now = ctx.clock()
    if dra is not None:  # claims say who holds which GPU, slices which device is which GPU
        pods = dra.pods(pods)
        involved = dra.held(involved, pods, now)
    pdbs = driver.pdbs(ctx) if pods else []
    approved = (obj["metadata"].get("annotations") or {}).get(c.APPROVE_PLAN_ANNOTATION)
    policy = pool_claims.policy(obj["metadata"]["name"], seen.claims, spec.rollout)
    room = driver.room(ctx, nodes, involved, desired, dra)
    busy = idle.recheck(seen.owner, desired, involved, pods, policy.drain) if choosing else ()
    plan = rollout.plan(
        seen.owner,
        policy,
        desired,
        involved,
        pods,
        pdbs,
        now,
        approved,
        room,
        queue=True,
        hold=idle.hold(busy),
    )
    follow = None
    if dra is None:  # a DRA node's recount also reads its claims: the next pass makes it
        view = functools.partial(cluster.pool_view, sharing=sharing)
        follow = recount.follower(ctx, ref_of(obj), seen.owner, policy, desired, view)
    ref = ref_of(obj)
    if dra is not None:  # the nodes in their window: rules first, evictions after
        dra_taints.sync(ctx, ref, seen.owner, involved, dra.pools, owners)
    applied = driver.apply(ctx, ref, plan.stages, seen.views, follow)
    evictions.announce_held(ctx, ref, plan.nodes)
    tainted = None
    if dra is not None:  # and as the nodes are now: a node released here keeps none
        after = device_taints.after(involved, plan.actions)
        tainted = dra_taints.sync(ctx, ref, seen.owner, after, dra.pools, owners, remove=applied)
    return plan, applied, tainted, busy


def finalize(ctx: Context, name: str) -> bool:
    """Finish or back out in-flight nodes; True once no node carries this pool's cordon or
    state (and on a DRA pool, no DeviceTaintRule of its own is left)."""
    obj = ctx.kube.get_or_none(custom_path(PLURAL, name))
    try:
        spec: NodePoolGeometrySpec | None = NodePoolGeometrySpec.model_validate(
            (obj or {}).get("spec") or {}
        )
    except ValidationError:
        spec = None  # the spec never parsed: back out with the defaults
    policy = spec.rollout if spec else RolloutSpec()
    owner = owner_id(name)
    nodes = list_nodes(ctx)
    views = [cluster.pool_view(n, {}) for n in nodes]
    mine = [v for v in views if cluster.touched_by(v, owner)]
    if mine and any(v.state and v.state.target.plugin for v in mine):  # a DRA node verifying
        mine = dra_pool.fill(ctx, spec.dra if spec else None, mine)  # records name the plugin
    who = dra_classes.declarer(KIND, name)
    synced = dra_classes.sync(ctx, nodes, without=who)  # its classes go
    unsynced = _declares_classes(obj) and dra_classes.holds_deletion(synced, who)
    result = rollout.backout(owner, policy, mine, ctx.clock())
    ref = ref_of(obj) if obj else Ref(c.API_VERSION, KIND, name)
    applied = driver.apply(ctx, ref, [result.actions], {v.name: v for v in mine})
    if _declares_classes(obj):  # its DeviceTaintRules go with the hold they kept
        after = device_taints.after(mine, result.actions)
        pools = slice_pools(dra_pool.slices(ctx))
        left = dra_taints.sync(ctx, ref, owner, after, pools, remove=applied)
        unsynced = unsynced or bool(left.held)
    if result.done and not unsynced:
        metrics.forget_rollout(KIND, name)
        ctx.passes.forget((KIND, name))
    return result.done and not unsynced


def _declares_classes(obj: Obj | None) -> bool:
    """A DRA pool: its finalizer waits until its classes are synced away (a device-plugin
    pool's deletion never waits on DRA)."""
    return ((obj or {}).get("spec") or {}).get("allocation") == "DRA"


# -- observe -------------------------------------------------------------------------------------


def _sharing(ctx: Context) -> Mapping[str, Any]:
    """The device-plugin ConfigMap's data: which sharing to undo when verifying a layout."""
    ns, cm_name = ctx.settings.device_plugin_configmap
    cm = ctx.kube.get_or_none(path_of("v1", "configmaps", cm_name, ns))
    return (cm or {}).get("data") or {}


def _inputs(ctx: Context, obj: Obj) -> tuple[Hashable, ...]:
    """What a pass reads besides the Nodes (``skipping``): the pool as written (status too,
    should a hand clear it), every pool's and policy's spec, the device-plugin and agent
    ConfigMaps (mig-parted's, the vNPU agent's, the vGPU Device Manager's), the DeviceClasses (and a DRA pool's ResourceSlices, by which it also verifies:
    ``dra_classes.inputs``), and with the autopilot on the pods no node holds yet."""
    dra = (obj.get("spec") or {}).get("allocation") == "DRA"
    return (
        obj["metadata"].get("resourceVersion"),
        skipping.generations(ctx.kube, custom_path(PLURAL)),
        skipping.generations(ctx.kube, custom_path("sharingpolicies")),
        dra_classes.inputs(ctx, slices=dra),
        skipping.configmap(ctx.kube, ctx.settings.device_plugin_configmap),
        skipping.configmap(ctx.kube, ctx.settings.mig_configmap),
        skipping.configmap(ctx.kube, ctx.settings.vnpu_configmap),
        skipping.configmap(ctx.kube, ctx.settings.vgpu_configmap),
        autopilot.inputs(ctx, obj),
    )


def _other_pools(ctx: Context, name: str) -> dict[str, LabelSelector | None]:
    """The other pools' nodeSelectors: a node belongs to one pool only."""
    others = pool_claims.claimants(ctx.kube.list(custom_path(PLURAL)))
    others.pop(name, None)
    return others


def _verdict(
    name: str, spec: NodePoolGeometrySpec, seen: cluster.PoolObservation, plan: rollout.Plan
) -> Verdict:
    if not seen.targets and not seen.claims.conflicts_of(name):
        return empty_pools.verdict(name, spec)
    in_flight = plan.counts.in_progress + plan.counts.blocked
    return pool_claims.verdict(name, seen.claims, plan.verdict, in_flight)


# -- status --------------------------------------------------------------------------------------


def _status(
    obj: Obj, plan: rollout.Plan, targets: Mapping[str, pools.NodeTarget]
) -> dict[str, Any]:
    capacity: dict[str, int] = {}
    for target in targets.values():
        for resource, count in target.capacity.items():
            capacity[resource] = capacity.get(resource, 0) + count
    return {
        "observedGeneration": obj["metadata"].get("generation", 0),
        "plan": plan.summary.model_dump(by_alias=True),
        "nodes": plan.counts.model_dump(by_alias=True),
        "problems": [p.model_dump(by_alias=True) for p in plan.problems],
        "scopes": [s.model_dump(by_alias=True) for s in plan.scopes],
        "capacity": {k: str(v) for k, v in sorted(capacity.items())},
        "conditions": [],  # the pass's verdict, added by the skeleton
    }
