"""SharingPolicy controller: observe → plan → apply → roll out → status.

A node runs one sharing config, so every pass plans all policies together
(``tessera.domain.sharing.planning.plan``) and passes are serialised by one
lock: two policies' daemons never write the same ConfigMap at once. A pass
applies the plan and observes again until nothing is left to write (at most
``MAX_ROUNDS``), then steps this policy's rollout for disruptive nodes, then
writes this policy's status. A converged cluster costs reads only.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pydantic import ValidationError

from tessera.adapters.events import Ref
from tessera.adapters.kube import Obj
from tessera.api import constants as c
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.controllers import skeleton
from tessera.controllers.dra import classes as dra_classes
from tessera.controllers.runtime import Context, Result, custom_path, ref_of
from tessera.controllers.schedulers import sync as schedulers
from tessera.controllers.sharing import apply as sharing_apply
from tessera.controllers.sharing import observe as sharing_observe
from tessera.controllers.sharing import pod_contract
from tessera.controllers.sharing import rollout as sharing_rollout
from tessera.domain import rollout
from tessera.domain.base.conditions import Verdict
from tessera.domain.dra.verdicts import ClassesSynced
from tessera.domain.schedulers import outcome as sched_outcome
from tessera.domain.sharing import planning, rollout_targets, status
from tessera.domain.sharing.assignment import assign
from tessera.observability import metrics
from tessera.observability.tracing import span

PLURAL = sharing_observe.PLURAL
KIND = "SharingPolicy"
MAX_ROUNDS = 3
ROLLING_REQUEUE = 1.0  # seconds between passes while a rollout drains or verifies
log = logging.getLogger("tessera.sharingpolicy")
STATES = ("matched", "applied", "conflicted", "awaiting-rollout")
_LOCK = threading.Lock()
_KIND = skeleton.Kind(KIND, PLURAL, sharing_observe.spec_of, inputs=sharing_observe.inputs)


def reconcile(ctx: Context, name: str) -> Result:
    return skeleton.run(ctx, _KIND, name, _steps)


def _steps(ctx: Context, obj: Obj, spec: SharingPolicySpec) -> skeleton.PassOutcome | None:
    name = obj["metadata"]["name"]
    with _LOCK:
        snap, plan, writes = _converge(ctx, obj)
        if name not in plan.results:  # being deleted since the pass read it: finalize's turn
            return None
        rolled = sharing_rollout.run(ctx, obj, spec, plan, snap.facts, snap.nodes)
    summary = status.summarize(plan, name, snap.facts.values())
    _warn_once(ctx, obj, summary.verdict)
    verdict = _verdict(summary.verdict, rolled, snap.missing_pools.get(name))
    synced = dra_classes.sync(ctx, snap.nodes.values())  # classes are shared: every pass
    on_dra = any(p.name == name and p.dra_pool for p in snap.policies)
    dra_classes.report(synced, dra_classes.declarer(KIND, name), on_dra=on_dra)
    verdict = _dra_verdict(verdict, synced, name) if on_dra else verdict
    # scheduler configs are shared: every pass syncs all of them
    scheduled = schedulers.sync(ctx, snap.policies, plan, snap.nodes, refs=snap.refs)
    scheduler = schedulers.report(scheduled, name)
    verdict = sched_outcome.overall(verdict, scheduler)
    nodes_of = plan.assignment.nodes_of  # its pod contract, against every policy's
    guarded = pod_contract.guard(ctx, obj, name, snap.policies, snap.facts, nodes_of)
    verdict = pod_contract.verdict(verdict, guarded, name)
    actions = len(rolled.actions) if rolled is not None else 0
    log.info(
        "sharingpolicy/%s: pass done: %d config write(s), %d rollout action(s)",
        name,
        writes,
        actions,
    )
    _export(name, summary, plan)
    metrics.export_rollout(KIND, name, rolled)
    busy = rolled is not None and rolled.requeue_after is not None
    starved = rolled is not None and bool(rolled.short_of_room)
    result = Result(ROLLING_REQUEUE if busy else None, starved=starved)
    found = _status(obj, summary)
    if on_dra:
        found["deviceClasses"] = list(synced.classes_of(dra_classes.declarer(KIND, name)))
    if spec.scheduler is not None:
        found["scheduler"] = sched_outcome.status(spec.scheduler.name, scheduler)
    pod_contract.report(found, spec, guarded)
    return skeleton.PassOutcome(verdict, found, result)


def finalize(ctx: Context, name: str) -> bool:
    """Return this policy's nodes to the default config; drop only Tessera's entries.

    True once every node this policy's rollout held is given back; False asks
    the caller to call again (a write failed: the next call re-plans).
    """
    with _LOCK, span("finalize", kind=KIND, name=name):
        obj = ctx.kube.get_or_none(custom_path(PLURAL, name))
        snap, plan, _ = _converge(ctx, obj, without=name)
        who = dra_classes.declarer(KIND, name)
        synced = dra_classes.sync(ctx, snap.nodes.values(), without=who)
        gone = _spec_or_none(obj)
        scheduled = schedulers.sync(ctx, snap.policies, plan, snap.nodes, gone=gone)
        done = obj is None or sharing_rollout.release_all(ctx, obj, snap.nodes)
        done = done and not dra_classes.holds_deletion(synced, who)  # its classes go first
        done = done and not schedulers.holds_deletion(scheduled)  # and its scheduler fields
        done = not pod_contract.sync(ctx, obj, name, None).failed and done  # its VAP goes
        for state in STATES:
            try:
                metrics.SHARING_NODES.remove(name, state)
            except KeyError:
                continue  # never exported (the policy was never reconciled here)
        if done:
            metrics.forget_rollout(KIND, name)
            ctx.passes.forget((KIND, name))
    return done


def _spec_or_none(obj: Obj | None) -> SharingPolicySpec | None:
    try:
        return None if obj is None else sharing_observe.spec_of(obj)
    except ValidationError:
        return None


def _converge(
    ctx: Context, obj: Obj | None, without: str | None = None
) -> tuple[sharing_observe.Snapshot, planning.SharingPlan, int]:
    """Plan and apply until a plan has nothing left to write (keys, labels, cleanup, HAMi)."""
    settings = sharing_observe.settings_of(ctx)
    total = 0
    for _ in range(MAX_ROUNDS):
        snap = sharing_observe.snapshot(ctx, without=without)
        views = sharing_rollout.views(snap.nodes).values()
        cleared = rollout_targets.cleared(assign(snap.policies, snap.facts.values()), views)
        plan = planning.plan(snap.policies, snap.observed(), settings, cleared)
        stale = rollout_targets.stale_mode_labels(plan.assignment, snap.facts)
        applied = sharing_apply.apply(ctx, plan, snap.nvidia, snap.ascend)
        writes = applied.writes + sharing_apply.drop_mode_labels(ctx, stale)
        shared = rollout_targets.stale_device_share(plan.assignment, snap.facts)
        writes += sharing_apply.switch_device_share_off(ctx, shared)
        _announce(ctx, obj, plan, snap, plugin_map=applied.plugin_map, without=without)
        total += writes
        if writes == 0:
            break
    return snap, plan, total


def _announce(
    ctx: Context,
    obj: Obj | None,
    plan: planning.SharingPlan,
    snap: sharing_observe.Snapshot,
    *,
    plugin_map: bool = True,
    without: str | None = None,
) -> None:
    """Events on the policy whose plan made each write: one pass writes for every policy.

    A restored hand edit is a Warning ``DriftRestored``; other writes are summed up in
    one ``ConfigWritten`` per policy. A write no policy's plan made (the default key) is
    logged only, except while ``without`` is being deleted: its releases are its own.
    ``plugin_map`` False: the device-plugin ConfigMap could not be written (no GPU Operator
    namespace), so its notes describe writes that did not happen and are not announced.
    """
    written = plan.device_plugin.notes if plugin_map else ()
    notes = (*written, *plan.hami_nvidia.notes, *plan.hami_ascend.notes)
    moved: dict[str, list[str]] = {}
    for note in notes:
        log.info("%s: %s", note.action, note.message)
        owner = note.policy or without
        if owner is None:
            continue
        if note.restores:
            ctx.events.post(
                _ref(owner, obj, snap), "DriftRestored", note.message, ctx.clock(), "Warning"
            )
        else:
            moved.setdefault(owner, []).append(note.message)
    for owner, messages in sorted(moved.items()):
        more = f" (and {len(messages) - 3} more)" if len(messages) > 3 else ""
        text = "; ".join(messages[:3]) + more
        ctx.events.post(_ref(owner, obj, snap), "ConfigWritten", text, ctx.clock())
    for doc in (snap.nvidia, snap.ascend):
        if doc.error and obj is not None:
            ctx.events.post(ref_of(obj), "HAMiConfigUnreadable", doc.error, ctx.clock(), "Warning")


WARNED_ONCE = {"ReferenceOnly": "True", "Prerequisites": "Unknown"}
"""Conditions also told as a Warning Event, once per policy and message (vCANN-RT's)."""


def _warn_once(ctx: Context, obj: Obj, verdict: Verdict) -> None:
    uid = str(obj["metadata"].get("uid", ""))
    for kind, status_, reason, message in verdict.extra:
        if WARNED_ONCE.get(kind) == status_ and ctx.events.first(uid, reason, message):
            ctx.events.post(ref_of(obj), reason, message, ctx.clock(), "Warning")


def _ref(name: str, obj: Obj | None, snap: sharing_observe.Snapshot) -> Ref:
    """The policy ``name`` as its Events name it (with its uid, which ``kubectl describe``
    selects by)."""
    if obj is not None and obj["metadata"]["name"] == name:
        return ref_of(obj)
    return snap.refs.get(name) or Ref(c.API_VERSION, KIND, name)


def _verdict(base: Verdict, rolled: rollout.Plan | None, missing_pool: str | None) -> Verdict:
    if missing_pool is not None:
        text = f"spec.poolRef: NodePoolGeometry {missing_pool} does not exist"
        return Verdict("stalled", "PoolNotFound", text, base.extra)
    if rolled is None or base.state == "stalled" or rolled.verdict.state == "ready":
        return base
    return Verdict(rolled.verdict.state, rolled.verdict.reason, rolled.verdict.message, base.extra)


def _dra_verdict(base: Verdict, synced: ClassesSynced, name: str) -> Verdict:
    """A policy on a DRA pool: its classes' problems, else which classes carry its config."""
    who = dra_classes.declarer(KIND, name)
    found = synced.verdict(who)
    if found is not None:
        return Verdict(found.state, found.reason, found.message, base.extra)
    if base.state != "ready":
        return base
    text = f"DeviceClass(es) {', '.join(synced.classes_of(who))} carry its sharing config"
    return Verdict("ready", "Applied", text, base.extra)


def _status(obj: Obj, summary: status.Summary) -> dict[str, Any]:
    return {
        "observedGeneration": obj["metadata"].get("generation", 0),
        "configKey": summary.config_key,
        "nodes": {
            "matched": summary.matched,
            "applied": summary.applied,
            "conflicted": summary.conflicted,
        },
        "advertised": dict(summary.advertised),
        "conditions": [],  # the pass's verdict, added by the skeleton
    }


def _export(name: str, summary: status.Summary, plan: planning.SharingPlan) -> None:
    awaiting = len(set(plan.assignment.nodes_of(name)) & set(plan.awaiting_rollout))
    figures = (summary.matched, summary.applied, summary.conflicted, awaiting)
    for state, value in zip(STATES, figures, strict=True):
        metrics.SHARING_NODES.labels(name, state).set(value)
