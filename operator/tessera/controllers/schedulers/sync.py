"""The scheduler side of SharingPolicies: HAMi's device config and Volcano's, one sync per pass.

A scheduler's config is shared by every policy naming it, so — like the DeviceClasses
(``controllers.dra.classes``) — no pass writes "its own" part: every SharingPolicy pass (and a deleted
policy's finalizer, ``without`` it) runs ``sync``, which gathers all policies' asks
(``tessera.domain.schedulers.demands``), reads the scheduler Deployments once, finds the
versions (declared or image tag), lets each part make its config match, and answers per
policy. One lock serialises syncs within the operator; each part writes with the
resourceVersion it planned from and re-plans on a 409.

Parts: ``hami.config`` (``hami-scheduler-device``) and ``volcano``
(``volcano-scheduler.conf`` and its geometries map).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tessera.adapters.events import Ref
from tessera.adapters.kube import ApiError, Obj, path_of
from tessera.api import constants as c
from tessera.api.v1alpha1.scheduler import HamiScheduler, VolcanoScheduler
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.controllers import skeleton, skipping
from tessera.controllers.runtime import Context
from tessera.controllers.schedulers import volcano
from tessera.controllers.schedulers.hami import config as hami_scheduler
from tessera.domain.base import failures
from tessera.domain.base.failures import Failure
from tessera.domain.schedulers import ObjectKey, PolicyDemand, SchedulerOutcome, outcome
from tessera.domain.schedulers import demands as asks
from tessera.domain.schedulers.versions import Component, Detected, VersionUnknownError, detect
from tessera.domain.sharing.assignment import Policy
from tessera.domain.sharing.planning import SharingPlan

log = logging.getLogger("tessera.schedulers")
_LOCK = threading.Lock()
Deployments = Mapping[ObjectKey, Mapping[str, Any] | None]
DEFAULT_HAMI_MAP = ObjectKey(c.HAMI_NAMESPACE, c.HAMI_SCHEDULER_CONFIGMAP_NAME)
DEFAULT_VOLCANO_CONF = ObjectKey.of(VolcanoScheduler().config_map)


@dataclass(frozen=True)
class SchedulersSynced:
    """Each policy's scheduler outcome, and the API errors met, by the policy they concern.

    A config whose read or write failed is left for the next pass; the policies naming it
    report the failure (``report``: Reconciling, then Stalled, with the API's message, such
    as the 403 naming a map the Role does not grant), and a deleted policy's finalizer tries
    again (``holds_deletion``)."""

    outcomes: Mapping[str, SchedulerOutcome] = field(default_factory=dict)
    failures: Mapping[str, Failure] = field(default_factory=dict)
    """By policy; ``""``: a config only a deleted policy named."""


def sync(
    ctx: Context,
    policies: Iterable[Policy],
    plan: SharingPlan,
    nodes: Mapping[str, Obj],
    *,
    gone: SharingPolicySpec | None = None,
    refs: Mapping[str, Ref] | None = None,
) -> SchedulersSynced:
    """Make every scheduler config the policies name match them; each policy's outcome.

    ``policies`` are those the pass planned (a policy being deleted is already left out, so
    its fields go); ``plan`` tells which nodes each governs, ``nodes`` their labels. ``gone``
    is the spec of a policy being deleted: the configs it named are visited too, even when
    no other policy names them, so its fields go from there as well. ``refs``: how each
    policy's Events name it; a policy whose config this sync wrote gets one
    ``SchedulerConfigWritten``; one whose HAMi config would not load, a Warning
    ``SchedulerConfigUnloadable``.
    """
    with _LOCK:
        wanted = [p for p in policies if p.spec.scheduler is not None]
        failures: dict[str, Failure] = {}
        parts: dict[str, list[SchedulerOutcome]] = {}
        try:
            deployments = _deployments(ctx, [p.spec for p in wanted] + ([gone] if gone else []))
        except ApiError as err:
            return SchedulersSynced(
                failures={p.name: Failure(err.status, str(err)) for p in wanted}
            )
        made = (_demand(p, plan, nodes, deployments) for p in wanted)
        demands = [d for d in made if d is not None]
        # HAMi's default map is always looked at: a policy that dropped spec.scheduler (or
        # was deleted) leaves fields there that no other policy's ask would release.
        released = (DEFAULT_HAMI_MAP, *_named_maps(gone, "hami"))
        hami_demands = [d for d in demands if d.uses_hami]
        answered = hami_scheduler.sync(ctx, hami_demands, deployments, released)
        failures |= answered.failures
        for name, found in answered.outcomes.items():
            parts.setdefault(name, []).append(found)
        # --- Volcano hook (owner: the Volcano part, controllers/schedulers/volcano.py) -------------
        # A config no policy names any more comes with no policies: released. Like HAMi's,
        # the default one is always looked at, and so is any Tessera edited (its label):
        # a policy that switched to HAMi, dropped spec.scheduler or named another map.
        named = [d.policy for d in demands if d.scheduler.name == "Volcano"] or [""]
        try:
            seen = (DEFAULT_VOLCANO_CONF, *volcano.edited(ctx), *_named_maps(gone, "volcano"))
            grouped = asks.volcano_demands(demands, seen)
            volcano_demands = {
                key: _with_deployments(one, deployments, gone) for key, one in grouped.items()
            }
            for name, found in volcano.sync(ctx, volcano_demands).items():
                parts.setdefault(name, []).append(found)
        except ApiError as err:
            log.warning("Volcano scheduler config not synced: %s", err)
            failures |= {name: Failure(err.status, str(err)) for name in named}
        # ---------------------------------------------------------------------------------
        merged = {name: outcome.merge(found) for name, found in parts.items()}
        outcomes = {name: found for name, found in merged.items() if found is not None}
        _announce(ctx, outcomes, refs or {})
        return SchedulersSynced(outcomes, failures)


def _announce(
    ctx: Context, outcomes: Mapping[str, SchedulerOutcome], refs: Mapping[str, Ref]
) -> None:
    for name, found in sorted(outcomes.items()):
        ref = refs.get(name) or Ref(c.API_VERSION, "SharingPolicy", name)
        if found.verdict.reason == outcome.CONFIG_UNLOADABLE:  # once per message (the recorder)
            ctx.events.post(
                ref, outcome.CONFIG_UNLOADABLE, found.verdict.message, ctx.clock(), "Warning"
            )
        if not found.notes:
            continue
        more = f" (and {len(found.notes) - 3} more)" if len(found.notes) > 3 else ""
        text = "; ".join(found.notes[:3]) + more
        ctx.events.post(ref, "SchedulerConfigWritten", text, ctx.clock())


def report(synced: SchedulersSynced, name: str) -> SchedulerOutcome | None:
    """This policy's outcome; a part's API error that concerns it is noted for the pass
    (reported like any refused write: Reconciling, then Stalled)."""
    found = synced.failures.get(name)
    if found is not None:
        skeleton.failed(found)
    return synced.outcomes.get(name)


def holds_deletion(synced: SchedulersSynced) -> bool:
    """A deleted policy's finalizer waits until the sync without it landed, unless only a
    person can make it land (a 403: a config map the Role does not grant), which is logged."""
    held = False
    for found in synced.failures.values():
        if failures.transient(found.status):
            held = True
        else:
            log.error("scheduler configs keep a deleted policy's fields: %s", found.message)
    return held


def _named_maps(spec: SharingPolicySpec | None, component: str) -> tuple[ObjectKey, ...]:
    scheduler = spec.scheduler if spec is not None else None
    if scheduler is None:
        return ()
    if component == "hami":
        return (ObjectKey.of(scheduler.hami.config_map),)
    return (ObjectKey.of(scheduler.volcano.config_map),) if scheduler.volcano else ()


def _deployments(ctx: Context, specs: Iterable[SharingPolicySpec]) -> dict[ObjectKey, Obj | None]:
    """Every scheduler Deployment the policies name, read once (None: absent)."""
    keys: set[ObjectKey] = set()
    for spec in specs:
        scheduler = spec.scheduler
        if scheduler is None:
            continue
        keys.add(ObjectKey.of(scheduler.hami.deployment))
        if scheduler.volcano is not None:
            keys.add(ObjectKey.of(scheduler.volcano.deployment))
    return {
        key: ctx.kube.get_or_none(path_of("apps/v1", "deployments", key.name, key.namespace))
        for key in sorted(keys)
    }


def _demand(
    policy: Policy, plan: SharingPlan, nodes: Mapping[str, Obj], deployments: Deployments
) -> PolicyDemand | None:
    """The policy's ask, with the versions found for it; None without ``spec.scheduler``."""
    scheduler = policy.spec.scheduler
    if scheduler is None:
        return None
    found: dict[Component, Detected] = {}
    unknown: dict[Component, str] = {}
    blocks: tuple[tuple[Component, HamiScheduler | VolcanoScheduler | None], ...] = (
        ("hami", scheduler.hami),
        ("volcano", scheduler.volcano),
    )
    for component, block in blocks:
        if block is None:
            continue
        key = ObjectKey.of(block.deployment)
        try:
            found[component] = detect(component, block.version, deployments.get(key), str(key))
        except VersionUnknownError as err:
            unknown[component] = str(err)
    governed = [nodes[n] for n in plan.assignment.nodes_of(policy.name) if n in nodes]
    labels = [(n["metadata"].get("labels") or {}) for n in governed]
    return asks.demand(policy.name, policy.spec, scheduler, labels, found, unknown)


def _with_deployments(
    one: asks.VolcanoDemand, deployments: Deployments, gone: SharingPolicySpec | None
) -> asks.VolcanoDemand:
    named = {ObjectKey.of(p.volcano.deployment) for p in one.policies}
    if not one.policies and gone is not None and gone.scheduler and gone.scheduler.volcano:
        named.add(ObjectKey.of(gone.scheduler.volcano.deployment))
    return asks.VolcanoDemand(
        one.config_map, one.policies, {k: deployments.get(k) for k in sorted(named)}
    )


def inputs(ctx: Context, specs: Iterable[SharingPolicySpec]) -> tuple[Hashable, ...]:
    """What the scheduler sync reads besides policies, pools and nodes (``skipping``): the
    scheduler ConfigMaps and Deployments the policies name (a Deployment's image tag is a
    version; its restarts end a pending restart)."""
    maps: set[ObjectKey] = set()
    specs = list(specs)
    for spec in specs:
        if spec.scheduler is not None:
            maps.add(ObjectKey.of(spec.scheduler.hami.config_map))
            if spec.scheduler.volcano is not None:
                maps.add(ObjectKey.of(spec.scheduler.volcano.config_map))
    read = [(str(k), skipping.configmap(ctx.kube, (k.namespace, k.name))) for k in sorted(maps)]
    for key, obj in _deployments(ctx, specs).items():
        read.append((str(key), None if obj is None else obj["metadata"].get("resourceVersion")))
    return tuple(read)
