"""Whether HAMi's scheduler has read its device config: the change stamp and the pods.

``stamp`` dates each change of ``device-config.yaml`` with the API server's time (the map as
the changing write returned it; ``domain.schedulers.hami.restart``) on the map itself, so
every later pass — and a restarted operator — knows it. ``verdict`` turns a policy's ready
verdict into ``RestartPending`` while ``hami-scheduler``'s pods are older than the change
(Tessera never restarts HAMi: the API has no ``hami.restart``; the message says how), and
into ``SchedulerTrap`` when the scheduler runs without ``--enable-ascend`` though the policy's
nodes hold Ascend chips.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tessera.adapters.kube import Obj, path_of
from tessera.controllers.runtime import Context
from tessera.domain.base.conditions import Verdict
from tessera.domain.schedulers import ObjectKey, PolicyDemand, outcome
from tessera.domain.schedulers.hami import restart as hami_restart

Deployments = Mapping[ObjectKey, Mapping[str, Any] | None]


@dataclass(frozen=True)
class Stamp:
    """When the file last changed ("": Tessera never changed it) and the scheduler pods live
    then."""

    at: str
    pods: frozenset[str] = frozenset()


def unstamped(text: str) -> dict[str, str]:
    """The annotation Tessera's write of ``text`` carries: the change, its time not yet known
    (the server gives it in the write's answer; ``stamp`` adds it)."""
    return {hami_restart.STAMP: json.dumps({"digest": hami_restart.digest(text), "at": ""})}


def stamp(
    ctx: Context, path: str, obj: Obj, text: str, *, keep: bool, schedulers: Deployments
) -> Stamp:
    """The time of the file's last change ("" when Tessera never changed it); ``obj`` is the
    map as last read or written (after Tessera's write: as the write returned it). A change
    not yet dated (Tessera's write, or a stamp lost to a race) or a file changed since its
    stamp (a person's edit) is dated with the latest time the server recorded on the map —
    never earlier than the change — and the pods of ``schedulers`` (HAMi's Deployments the
    map's policies name) then live. ``keep`` False (no policy names the map) drops the stamp."""
    notes = obj["metadata"].get("annotations") or {}
    digest, at = hami_restart.stamped(notes)
    if not keep:
        if hami_restart.STAMP in notes:
            _annotate(ctx, path, obj, None)
        return Stamp("")
    if not digest or (digest == hami_restart.digest(text) and at):
        return Stamp(at, hami_restart.recorded(notes))
    live = [
        p["metadata"]["uid"]
        for key, deployment in sorted(schedulers.items())
        if deployment is not None
        for p in _pods(ctx, key, deployment)
    ]
    new = hami_restart.stamp(text, obj, live)
    if new is None:
        return Stamp(at, hami_restart.recorded(notes))
    _annotate(ctx, path, obj, new)
    found = {hami_restart.STAMP: new}
    return Stamp(hami_restart.stamped(found)[1], hami_restart.recorded(found))


def _annotate(ctx: Context, path: str, obj: Obj, value: str | None) -> None:
    meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
    ctx.kube.patch(path, {"metadata": {**meta, "annotations": {hami_restart.STAMP: value}}})


def verdict(
    ctx: Context, demand: PolicyDemand, deployments: Deployments, changed: Stamp, planned: Verdict
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
    if not changed.at or planned.state != "ready":
        return planned, False
    pods = _pods(ctx, key, deployment)
    waiting = hami_restart.stale(deployment, pods, changed.at, changed.pods)
    if waiting is None:
        return planned, False
    text = hami_restart.pending_message(key, changed.at, waiting)
    return Verdict("progressing", outcome.RESTART_PENDING, text), True


def _pods(ctx: Context, key: ObjectKey, deployment: Mapping[str, Any]) -> list[Obj]:
    match = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not match:
        return []
    selector = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
    return ctx.kube.list(path_of("v1", "pods", namespace=key.namespace), label_selector=selector)
