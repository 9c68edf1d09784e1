"""Whether HAMi's scheduler has read its device config: the change stamp and the pods.

``stamp`` dates each change of ``device-config.yaml`` with the API server's time (the map as
the changing write returned it; ``domain.schedulers.hami_restart``) on the map itself, so
every later pass — and a restarted operator — knows it. ``verdict`` turns a policy's ready
verdict into ``RestartPending`` while ``hami-scheduler``'s pods are older than the change
(Tessera never restarts HAMi: the API has no ``hami.restart``; the message says how), and
into ``SchedulerTrap`` when the scheduler runs without ``--enable-ascend`` though the policy's
nodes hold Ascend chips.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tessera.adapters.kube import Obj, path_of
from tessera.domain.conditions import Verdict
from tessera.domain.schedulers import ObjectKey, PolicyDemand, hami_restart, outcome

from .runtime import Context


def stamp(ctx: Context, path: str, obj: Obj, text: str, *, keep: bool, owned: bool) -> str:
    """The time of the file's last change ("" when Tessera has no part in it); ``obj`` is the
    map as last read or written (after Tessera's write: as the write returned it). A file
    changed since its stamp (by Tessera, or a person), or one Tessera owns fields of with no
    stamp (a stamp write lost to a race), is stamped anew — with the latest time the server
    recorded on it, never earlier than the change. ``keep`` False (no policy names the map)
    drops the stamp."""
    notes = obj["metadata"].get("annotations") or {}
    digest, at = hami_restart.stamped(notes)
    if not keep:
        if hami_restart.STAMP in notes:
            _annotate(ctx, path, obj, None)
        return ""
    if digest == hami_restart.digest(text) or (not digest and not owned):
        return at
    new = hami_restart.stamp(text, obj)
    if new is None:
        return at
    _annotate(ctx, path, obj, new)
    return hami_restart.stamped({hami_restart.STAMP: new})[1]


def _annotate(ctx: Context, path: str, obj: Obj, value: str | None) -> None:
    meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
    ctx.kube.patch(path, {"metadata": {**meta, "annotations": {hami_restart.STAMP: value}}})


def verdict(
    ctx: Context,
    demand: PolicyDemand,
    deployments: Mapping[ObjectKey, Mapping[str, Any] | None],
    changed_at: str,
    planned: Verdict,
) -> tuple[Verdict, bool]:
    """The policy's verdict with HAMi's scheduler's state; and whether a restart is pending."""
    if demand.scheduler.name != "HAMi" or planned.state == "stalled":
        return planned, False
    key = ObjectKey.of(demand.scheduler.hami.deployment)
    deployment = deployments.get(key)
    if deployment is None:
        return planned, False
    if demand.chips and not hami_restart.ascend_enabled(deployment):
        text = hami_restart.ascend_trap(key, demand.chips)
        return Verdict("stalled", outcome.TRAP, text), False
    if not changed_at or planned.state != "ready":
        return planned, False
    waiting = hami_restart.stale(deployment, _pods(ctx, key, deployment), changed_at)
    if waiting is None:
        return planned, False
    text = hami_restart.pending_message(key, changed_at, waiting)
    return Verdict("progressing", outcome.RESTART_PENDING, text), True


def _pods(ctx: Context, key: ObjectKey, deployment: Mapping[str, Any]) -> list[Obj]:
    match = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not match:
        return []
    selector = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
    return ctx.kube.list(path_of("v1", "pods", namespace=key.namespace), label_selector=selector)
