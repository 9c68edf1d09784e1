"""NodePoolGeometry controller: observe the pool → plan with the rollout engine → apply → status.

Per pass: read the pool's Nodes (and any node still carrying this pool's
rollout state or taint) and the other pools' selectors — a node belongs to one
pool only, so a node another pool keeps, or several pools contest, is left
alone (``tessera.domain.pool_claims``) —, derive each node's target from its GPU model or NPU
chip (``tessera.domain.pools``), make sure the agent ConfigMap holds every
config a node points at or may roll back to — written BEFORE any label names
it — then hand the observation to ``tessera.domain.rollout.plan`` and execute
its actions. Pods and PDBs are read only for nodes not yet at their target,
so a converged pool costs a Node list and a pool list and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tessera.adapters.events import Ref
from tessera.adapters.kube import ApiError, Obj, path_of
from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector, RolloutSpec
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain import cluster, empty_pools, pool_claims, pools, rollout
from tessera.domain.conditions import Verdict, landed

from . import dra_classes, dra_pool, evictions, skeleton, skipping
from . import rollout_driver as driver
from .runtime import Context, Result, custom_path, list_nodes, ref_of

PLURAL = "nodepoolgeometries"
KIND = "NodePoolGeometry"
log = logging.getLogger("tessera.nodepoolgeometry")
_CONFIGMAP_ATTEMPTS = 5
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


def _steps(ctx: Context, obj: Obj, spec: NodePoolGeometrySpec) -> skeleton.Outcome:
    name = obj["metadata"]["name"]
    where = _agent_configmap(ctx, spec)
    with ThreadPoolExecutor(4) as pool:  # four independent reads: wait for the slowest only
        listed = pool.submit(list_nodes, ctx.kube)
        sharing = pool.submit(_sharing, ctx)
        configs = pool.submit(ctx.kube.get_or_none, where.path)
        others = pool.submit(_other_pools, ctx, name)
        nodes = listed.result()
        seen = cluster.observe_pool(name, spec, nodes, sharing.result(), others.result())
    dra = None
    if dra_pool.is_dra(spec):
        seen, dra = dra_pool.observe(ctx, spec, seen)
    desired, involved = seen.desired, list(seen.involved)
    _ensure_configs(ctx, where, name, spec, seen, configs.result())
    if dra is not None and cluster.needs_pods(involved, desired):
        dra = dra_pool.with_claims(ctx, dra)
    pods = driver.pods_for(ctx, involved, desired)
    pods = dra.pods(pods) if dra is not None else pods
    pdbs = driver.pdbs(ctx) if pods else []
    approved = (obj["metadata"].get("annotations") or {}).get(c.APPROVE_PLAN_ANNOTATION)
    policy = pool_claims.policy(name, seen.claims, spec.rollout)
    room = driver.room(ctx, nodes, involved, desired, dra)
    plan = rollout.plan(
        seen.owner, policy, desired, involved, pods, pdbs, ctx.clock(), approved, room
    )
    applied = driver.apply(ctx, ref_of(obj), plan.stages, seen.views)
    evictions.announce_held(ctx, ref_of(obj), plan.nodes)
    verdict = landed(_verdict(name, spec, seen, plan), applied)
    status = _status(obj, plan, seen.targets)
    synced = dra_classes.sync(ctx, nodes)  # every pass: classes are shared by pools, policies
    dra_classes.report(synced, dra_classes.declarer(KIND, name), on_dra=dra is not None)
    if dra is not None:  # the slices listed once, by observe
        verdict, status["deviceClasses"] = dra_classes.pool_part(
            synced, name, seen, verdict, dra.slices
        )
    else:
        verdict = synced.verdict(dra_classes.declarer(KIND, name)) or verdict
    driver.export_phases(KIND, name, plan)
    result = Result(plan.requeue_after, starved=bool(plan.short_of_room))
    if verdict.reason == dra_classes.WAITING_FOR_DRIVER:  # no watch wakes it on a slice: look
        soon = min(plan.requeue_after or ctx.settings.resync_seconds, ctx.settings.resync_seconds)
        result = Result(soon, starved=result.starved)
    return skeleton.Outcome(verdict, status, result)


def finalize(ctx: Context, name: str) -> bool:
    """Finish or back out in-flight nodes; True once no node carries this pool's cordon or state."""
    obj = ctx.kube.get_or_none(custom_path(PLURAL, name))
    try:
        spec: NodePoolGeometrySpec | None = NodePoolGeometrySpec.model_validate(
            (obj or {}).get("spec") or {}
        )
    except ValidationError:
        spec = None  # the spec never parsed: back out with the defaults
    policy = spec.rollout if spec else RolloutSpec()
    owner = owner_id(name)
    nodes = list_nodes(ctx.kube)
    views = [cluster.pool_view(n, {}) for n in nodes]
    mine = [v for v in views if cluster.touched_by(v, owner)]
    if mine and any(v.state and v.state.target.plugin for v in mine):  # a DRA node verifying
        mine = dra_pool.fill(ctx, spec.dra if spec else None, mine)  # records name the plugin
    who = dra_classes.declarer(KIND, name)
    synced = dra_classes.sync(ctx, nodes, without=who)  # its classes go
    unsynced = _declares_classes(obj) and dra_classes.holds_deletion(synced, who)
    result = rollout.backout(owner, policy, mine, ctx.clock())
    ref = ref_of(obj) if obj else Ref(c.API_VERSION, KIND, name)
    driver.apply(ctx, ref, [result.actions], {v.name: v for v in mine})
    if result.done and not unsynced:
        driver.forget_phases(KIND, name)
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
    ``dra_classes.inputs``)."""
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


# -- apply ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _AgentConfigMap:
    """The ConfigMap the pool's node agent reads its layouts from, and where in it."""

    namespace: str
    name: str
    key: str
    section: str

    @property
    def path(self) -> str:
        return path_of("v1", "configmaps", self.name, self.namespace)


def _agent_configmap(ctx: Context, spec: NodePoolGeometrySpec) -> _AgentConfigMap:
    if pools.is_ascend(spec):
        ns, name = ctx.settings.vnpu_configmap
        return _AgentConfigMap(ns, name, c.VNPU_CONFIGMAP_KEY, "vnpu-configs")
    if pools.is_vgpu(spec):  # the vGPU Device Manager's map (GPU Operator vgpuDeviceManager)
        ns, name = ctx.settings.vgpu_configmap
        return _AgentConfigMap(ns, name, c.VGPU_CONFIGMAP_KEY, "vgpu-configs")
    ns, name = ctx.settings.mig_configmap
    return _AgentConfigMap(ns, name, c.MIG_PARTED_CONFIGMAP_KEY, "mig-configs")


def _ensure_configs(
    ctx: Context,
    where: _AgentConfigMap,
    pool: str,
    spec: NodePoolGeometrySpec,
    seen: cluster.PoolObservation,
    current: Obj | None,
) -> None:
    """Write the pool's configs into the agent ConfigMap before any label can name them.

    ``current`` is the ConfigMap as this pass read it; pools share the
    ConfigMap, so a write that loses a race re-reads it and tries again.
    """
    wanted, keep = cluster.pool_configs(spec, seen)
    for _ in range(_CONFIGMAP_ATTEMPTS):
        if _write_configs(ctx, where, current, pool, wanted, keep):
            return
        current = ctx.kube.get_or_none(where.path)
    raise ApiError(
        409, "Conflict", f"{where.namespace}/{where.name} kept changing while pool {pool} wrote it"
    )


def _write_configs(
    ctx: Context,
    where: _AgentConfigMap,
    current: Obj | None,
    pool: str,
    wanted: Mapping[str, list[dict[str, Any]]],
    keep: set[str],
) -> bool:
    """One optimistic attempt; False when another writer got there first."""
    ns, name, key = where.namespace, where.name, where.key
    text = pools.configs_document(
        ((current or {}).get("data") or {}).get(key, ""), pool, where.section, wanted, keep
    )
    if text is None:
        return True
    try:
        if current is None:
            _ensure_namespace(ctx, ns)
            body = {
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE},
                },
                "data": {key: text},
            }
            ctx.kube.create(path_of("v1", "configmaps", namespace=ns), body)
        else:
            version = current["metadata"]["resourceVersion"]
            ctx.kube.patch(
                where.path, {"metadata": {"resourceVersion": version}, "data": {key: text}}
            )
    except ApiError as err:
        if err.conflict:
            return False
        raise
    log.info("nodepoolgeometry/%s: wrote %s configs to %s/%s", pool, len(wanted), ns, name)
    return True


def _ensure_namespace(ctx: Context, namespace: str) -> None:
    if ctx.kube.get_or_none(path_of("v1", "namespaces", namespace)) is None:
        try:
            ctx.kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        except ApiError as err:
            if not err.conflict:
                raise


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
        "capacity": {k: str(v) for k, v in sorted(capacity.items())},
        "conditions": [],  # the pass's verdict, added by the skeleton
    }
