"""The scheduler part of a preview: what Tessera writes into Volcano's scheduler config.

For every Volcano config the SharingPolicies name once the manifests are applied, the same
plan the operator makes (``schedulers.volcano.plan.plan``, from the same demands: each
policy's chips from the nodes the sharing plan gives it, versions declared or read from the
Deployment's image tag, chip entries from HAMi's ``hami-scheduler-device``): the diffs of
``volcano-scheduler.conf`` and of Tessera's geometries map, whether Volcano restarts
(Automatic) or must be restarted (Manual), and the traps as notes.

An answer the plan cannot give is an error (exit 1), never "no changes": a Volcano config
or Deployment a policy names that the cluster read does not hold, an unknown version, two
policies disagreeing, or a conf that does not parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import yaml
from pydantic import ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1.scheduler import ObjectRef, VolcanoScheduler
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.preview.model import Cluster, Raw
from tessera.domain.preview.results import ConfigDiff, unified
from tessera.domain.preview.sharing import policies as sharing_policies
from tessera.domain.schedulers import ObjectKey, PolicyDemand, demands, traps
from tessera.domain.schedulers.versions import Component, Detected, VersionUnknownError, detect
from tessera.domain.schedulers.volcano import conf as volcano_conf
from tessera.domain.schedulers.volcano import geometries
from tessera.domain.schedulers.volcano import plan as vp
from tessera.domain.sharing.planning import SharingPlan

KIND = "SharingPolicy"
DEFAULT_VOLCANO_CONF = ObjectKey.of(VolcanoScheduler().config_map)


@dataclass(frozen=True)
class SchedulerPreviews:
    configs: tuple[ConfigDiff, ...] = ()
    errors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # policy → exit 1
    notes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # policy → traps
    writes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # policy → restarts


def named(objects: Iterable[Raw]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The ConfigMaps and Deployments (namespace, name) the SharingPolicies among
    ``objects`` name for their schedulers: what ``tessera plan`` reads besides the rest."""
    default = (DEFAULT_VOLCANO_CONF.namespace, DEFAULT_VOLCANO_CONF.name)
    maps: set[tuple[str, str]] = {default, (default[0], geometries.NAME)}
    deployments: set[tuple[str, str]] = set()
    for obj in objects:
        if obj.get("kind") != KIND:
            continue
        try:
            scheduler = SharingPolicySpec.model_validate(obj.get("spec") or {}).scheduler
        except ValidationError:
            continue
        if scheduler is None:
            continue
        maps.add((scheduler.hami.config_map.namespace, scheduler.hami.config_map.name))
        deployments.add((scheduler.hami.deployment.namespace, scheduler.hami.deployment.name))
        if scheduler.volcano is not None:
            ref = scheduler.volcano.config_map
            maps |= {(ref.namespace, ref.name), (ref.namespace, geometries.NAME)}
            deploy = scheduler.volcano.deployment
            deployments.add((deploy.namespace, deploy.name))
    return maps, deployments


def previews(before: Cluster, after: Cluster, plan: SharingPlan) -> SchedulerPreviews:
    asked: list[PolicyDemand] = []
    for policy in sharing_policies(after):
        scheduler = policy.spec.scheduler
        if scheduler is None or scheduler.name != "Volcano":
            continue
        labels = governed_labels(after, plan, policy.name)
        versions, unknown = _versions(before, policy.spec)
        asked.append(demands.demand(policy.name, policy.spec, scheduler, labels, versions, unknown))
    out = SchedulerPreviews()
    grouped_all = demands.volcano_demands(asked)
    for key, grouped in grouped_all.items():
        deploys = {ObjectKey.of(p.volcano.deployment) for p in grouped.policies}
        named_deploys = {k: find_deployment(before, k) for k in deploys}
        out = _joined(
            out, _one(before, demands.VolcanoDemand(key, grouped.policies, named_deploys))
        )
    return _joined(out, released(before, set(grouped_all)))


def released(before: Cluster, named: set[ObjectKey]) -> SchedulerPreviews:
    """The Volcano configs Tessera edited that no policy names once the manifests are
    applied (a policy pruned, deleted, switched to HAMi or pointed at another map): the
    operator gives their arguments back and deletes its geometries map, as the diffs say."""
    out = SchedulerPreviews()
    for key, names in sorted(_named_before(before).items()):
        if key in named:
            continue
        cm = before.configmap((key.namespace, key.name))
        if cm is None or not vp.edited(cm):
            continue
        out = _joined(out, _release(before, key, cm, names))
    return out


def _named_before(before: Cluster) -> dict[ObjectKey, tuple[str, ...]]:
    """The Volcano configs the live policies name (the default one always), and who names them."""
    out: dict[ObjectKey, list[str]] = {DEFAULT_VOLCANO_CONF: []}
    for policy in sharing_policies(before):
        scheduler = policy.spec.scheduler
        if scheduler is not None and scheduler.volcano is not None:
            out.setdefault(ObjectKey.of(scheduler.volcano.config_map), []).append(policy.name)
    return {k: tuple(v) for k, v in out.items()}


def _release(before: Cluster, key: ObjectKey, cm: Raw, names: tuple[str, ...]) -> SchedulerPreviews:
    conf = (cm.get("data") or {}).get(c.VOLCANO_SCHEDULER_CONFIGMAP_KEY)
    stamps = (cm.get("metadata") or {}).get("annotations") or {}
    previous = json.loads(stamps.get(vp.PREVIOUS_ANNOTATION) or "{}")
    found = vp.plan(demands.VolcanoDemand(key, ()), conf, {}, previous)
    diffs = []
    if conf is not None and found.conf is not None:
        diffs.append(unified(f"{key}/{c.VOLCANO_SCHEDULER_CONFIGMAP_KEY}", conf, found.conf))
    old = before.configmap((key.namespace, geometries.NAME))
    old_text = ((old or {}).get("data") or {}).get(geometries.KEY)
    if old_text is not None:
        diffs.append(unified(f"{key.namespace}/{geometries.NAME}/{geometries.KEY}", old_text, ""))
    said = (
        f"releases Volcano's {key}: Tessera's deviceshare arguments given back, "
        f"{key.namespace}/{geometries.NAME} deleted (restart Volcano to read it)"
    )
    writes = dict.fromkeys(names or ("",), (said,))
    return SchedulerPreviews(tuple(d for d in diffs if d is not None), writes=writes)


def _joined(a: SchedulerPreviews, b: SchedulerPreviews) -> SchedulerPreviews:
    return SchedulerPreviews(
        (*a.configs, *b.configs),
        {**a.errors, **b.errors},
        {**a.notes, **b.notes},
        {**a.writes, **b.writes},
    )


def _one(before: Cluster, one: demands.VolcanoDemand) -> SchedulerPreviews:
    """One Volcano config: the operator's plan for it, as diffs, errors, notes and writes."""
    key = one.config_map
    cm = before.configmap((key.namespace, key.name))
    conf = ((cm or {}).get("data") or {}).get(c.VOLCANO_SCHEDULER_CONFIGMAP_KEY)
    stamps = ((cm or {}).get("metadata") or {}).get("annotations") or {}
    previous = json.loads(stamps.get(vp.PREVIOUS_ANNOTATION) or "{}")
    hami_key = one.policies[0].hami_config
    hami = before.configmap((hami_key.namespace, hami_key.name))
    text = ((hami or {}).get("data") or {}).get(c.HAMI_SCHEDULER_CONFIGMAP_KEY)
    missing = "" if text is not None else f"HAMi's ConfigMap {hami_key}"
    found = vp.plan(one, conf, vp.hami_entries(text or ""), previous, missing)
    errors: dict[str, tuple[str, ...]] = {}
    notes: dict[str, tuple[str, ...]] = {}
    today = _today(before, one, conf)
    for name, verdict in found.verdicts.items():
        if verdict.state == "ready":
            notes[name] = (*today, *found.warnings.get(name, ()))
        elif verdict.reason == "SchedulerTrap":
            notes[name] = (f"{verdict.reason}: {verdict.message}",)
        else:
            errors[name] = (f"{verdict.reason}: {verdict.message}",)
    if found.conf is None or found.geometries is None or conf is None:
        return SchedulerPreviews((), errors, notes)
    diff = unified(f"{key}/{c.VOLCANO_SCHEDULER_CONFIGMAP_KEY}", conf, found.conf)
    old = before.configmap((key.namespace, geometries.NAME))
    old_text = ((old or {}).get("data") or {}).get(geometries.KEY, "")
    where = f"{key.namespace}/{geometries.NAME}/{geometries.KEY}"
    new_map = unified(where, old_text, geometries.render(found.geometries))
    writes: dict[str, tuple[str, ...]] = {}
    if stamps.get(vp.DIGEST_ANNOTATION) != found.digest:
        writes = {p.policy: (_restart(p, one.deployments),) for p in one.policies}
    configs = tuple(d for d in (diff, new_map) if d is not None)
    return SchedulerPreviews(configs, errors, notes, writes)


def _today(before: Cluster, one: demands.VolcanoDemand, conf: str | None) -> tuple[str, ...]:
    """A trap Volcano is in now, which Tessera's map ends: Volcano ≤ v1.15 pointed at a map
    whose ``vnpus`` is the ``{hamiVnpuCore, configs}`` form (HAMi ≥ v2.9's)."""
    if conf is None or any("volcano" not in p.versions for p in one.policies):
        return ()
    try:
        now = volcano_conf.arguments(conf)
    except volcano_conf.ConfInvalid:
        return ()
    where = (
        str(now.get(volcano_conf.CM_NAMESPACE) or "kube-system"),
        str(now.get(volcano_conf.CM_NAME) or "volcano-vgpu-device-config"),
    )
    cm = before.configmap(where)
    text = ((cm or {}).get("data") or {}).get(geometries.KEY)
    if text is None:
        return ()
    try:
        vnpus = (yaml.safe_load(text) or {}).get("vnpus")
    except (yaml.YAMLError, AttributeError):
        return ()
    version = min(p.versions["volcano"].version for p in one.policies)
    trap = traps.map_form_too_new(version, vnpus, "/".join(where))
    if trap is None:
        return ()
    return (
        f"now: {trap.message}; Tessera points KnownGeometriesCM* at {geometries.NAME}, "
        "in the list form",
    )


def _restart(p: PolicyDemand, deployments: Iterable[ObjectKey]) -> str:
    names = ", ".join(str(k) for k in sorted(deployments))
    if p.volcano.restart == "Automatic":
        return f"restarts Volcano's Deployment {names} (restart: Automatic) to read the change"
    return f"Volcano must be restarted to read the change: Deployment {names} (restart: Manual)"


def governed_labels(cluster: Cluster, plan: SharingPlan, policy: str) -> list[Raw]:
    """The labels of the nodes ``plan`` gives ``policy``, as ``cluster`` has them."""
    governed = set(plan.assignment.nodes_of(policy))
    return [
        n["metadata"].get("labels") or {}
        for n in cluster.nodes
        if n["metadata"]["name"] in governed
    ]


def find_deployment(cluster: Cluster, key: ObjectKey) -> Raw | None:
    """The Deployment ``key`` in ``cluster``, or None."""
    for d in cluster.deployments:
        meta = d["metadata"]
        if meta.get("namespace") == key.namespace and meta["name"] == key.name:
            return d
    return None


def _versions(
    cluster: Cluster, spec: SharingPolicySpec
) -> tuple[dict[Component, Detected], dict[Component, str]]:
    scheduler = spec.scheduler
    found: dict[Component, Detected] = {}
    unknown: dict[Component, str] = {}
    if scheduler is None or scheduler.volcano is None:
        return found, unknown
    asked: tuple[tuple[Component, str | None, ObjectRef], ...] = (
        ("hami", scheduler.hami.version, scheduler.hami.deployment),
        ("volcano", scheduler.volcano.version, scheduler.volcano.deployment),
    )
    for component, declared, ref in asked:
        key = ObjectKey.of(ref)
        try:
            found[component] = detect(component, declared, find_deployment(cluster, key), str(key))
        except VersionUnknownError as err:
            unknown[component] = str(err)
    return found, unknown
