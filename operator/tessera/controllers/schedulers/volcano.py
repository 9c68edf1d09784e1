"""Volcano's scheduler config: the ``deviceshare`` plugin's arguments and the map of known
geometries it points at, kept consistent with the policies naming Volcano.

Called once per pass by ``controllers.schedulers.sync`` (the single writer of the scheduler
side), with every Volcano scheduler config the policies name and the policies naming each
(``tessera.domain.schedulers.VolcanoDemand``). Answers per policy; a policy it says nothing
about has no Volcano part (it names HAMi). Decisions are ``domain.schedulers.volcano.plan``'s;
this module reads, writes and restarts:

- the chip entries come from HAMi's ``hami-scheduler-device`` (Volcano's docs: merge its
  ``vnpus`` section into the map Volcano reads), kept by the HAMi part of the same sync;
- Tessera's map (``tessera-volcano-device-config``) is written whole, Volcano's conf edited
  in place; both writes name the resourceVersion they were planned from (a 409 re-plans);
- every write of Volcano's conf (a new digest of Tessera's part, or a hand edit restored) is
  a change, stamped on the map with the API server's time of that write; ``restart:
  Automatic`` restarts the Deployments as ``kubectl rollout restart`` does (pod template
  annotation ``kubectl.kubernetes.io/restartedAt``), once per change, with an Event; until
  the rollout is complete and every live scheduler pod is newer than the change the
  policies say ``RestartPending``;
- a conf Tessera edited (label ``tessera.io/deviceshare-edited``) that no policy names any
  more gets its arguments back and loses Tessera's map and marks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tessera.adapters.events import Ref
from tessera.adapters.kube import FIELD_MANAGER, ApiError, Obj, path_of
from tessera.api import constants as c
from tessera.controllers.runtime import Context
from tessera.domain.base.conditions import Verdict
from tessera.domain.schedulers import ObjectKey, SchedulerOutcome, VolcanoDemand, VolcanoDemands
from tessera.domain.schedulers.outcome import RESTART_PENDING
from tessera.domain.schedulers.volcano import geometries, restart
from tessera.domain.schedulers.volcano import plan as vp

log = logging.getLogger("tessera.volcano")
ATTEMPTS = 4


def sync(ctx: Context, demands: VolcanoDemands) -> dict[str, SchedulerOutcome]:
    """Make each named Volcano config match its policies; each policy's outcome by name."""
    out: dict[str, SchedulerOutcome] = {}
    shared = vp.one_map_per_namespace(demands)
    for key, demand in sorted(demands.items()):
        if any(p.policy in shared for p in demand.policies):
            out |= {p.policy: _outcome(shared[p.policy], key) for p in demand.policies}
            continue
        for attempt in range(ATTEMPTS):
            try:
                out.update(_one(ctx, key, demand))
                break
            except ApiError as err:
                if not err.conflict or attempt == ATTEMPTS - 1:
                    raise
                log.info("Volcano config %s changed while Tessera wrote it; re-planning", key)
    return out


def edited(ctx: Context) -> tuple[ObjectKey, ...]:
    """The Volcano maps Tessera's edit is on (its label), in any namespace."""
    found = ctx.kube.list(path_of("v1", "configmaps"), label_selector=vp.EDITED_LABEL)
    return tuple(
        sorted(ObjectKey(o["metadata"]["namespace"], o["metadata"]["name"]) for o in found)
    )


def _one(ctx: Context, key: ObjectKey, demand: VolcanoDemand) -> dict[str, SchedulerOutcome]:
    cm = ctx.kube.get_or_none(_cm_path(key))
    conf = ((cm or {}).get("data") or {}).get(c.VOLCANO_SCHEDULER_CONFIGMAP_KEY)
    notes = ((cm or {}).get("metadata") or {}).get("annotations") or {}
    previous = json.loads(notes.get(vp.PREVIOUS_ANNOTATION) or "{}")
    entries, hami_missing = _hami_entries(ctx, demand)
    found = vp.plan(demand, conf, entries, previous, hami_missing)
    if not demand.policies:
        if cm is not None and vp.edited(cm):
            _release(ctx, cm, found.conf)
        return {}
    if found.geometries is None or found.conf is None or cm is None:
        return {n: _outcome(v, key) for n, v in found.verdicts.items()}
    written = [
        f"{key.namespace}/{geometries.NAME}: {n}"
        for n in _write_map(ctx, key.namespace, found.geometries)
    ]
    changed_at = notes.get(vp.CHANGED_ANNOTATION, "")
    fresh = notes.get(vp.DIGEST_ANNOTATION) != found.digest
    if fresh or found.conf != conf or not restart.is_time(changed_at):
        # any write of the conf is a change Volcano reads only at start: stamped anew
        changed_at = _stamp(ctx, cm, found)
        log.info("Volcano config %s: deviceshare arguments %s", key, found.digest)
        said = "written" if fresh else "restored"
        written.append(f"{key}: deviceshare arguments {said}")
    pending = _restart(ctx, demand, changed_at)
    versions = {"volcano": found.version}
    out = {}
    for name, planned in found.verdicts.items():
        verdict = planned
        if pending and planned.state == "ready":
            verdict = Verdict("progressing", RESTART_PENDING, pending)
        out[name] = _outcome(
            verdict, key, versions, restart_pending=bool(pending), notes=tuple(written)
        )
        for warning in found.warnings.get(name, ()):
            if ctx.events.first("volcano-trap", name, warning):
                ctx.events.post(_policy(name), "SchedulerTrap", warning, ctx.clock(), "Warning")
    return out


def _stamp(ctx: Context, cm: Obj, found: vp.VolcanoPlan) -> str:
    """Write the conf, then stamp the change with the API server's time of that write (the
    operator's clock may be skewed from the one that times the scheduler pods)."""
    assert found.conf is not None
    notes = {
        vp.DIGEST_ANNOTATION: found.digest,
        vp.PREVIOUS_ANNOTATION: json.dumps(dict(found.previous), sort_keys=True),
        vp.CHANGED_ANNOTATION: None,
    }
    _write_conf(ctx, cm, found.conf, notes, {vp.EDITED_LABEL: "true"})
    changed_at = restart.written_at(cm, FIELD_MANAGER)
    if not changed_at:  # a server that returns no managedFields: the closest time there is
        changed_at = ctx.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = cm["metadata"]
    body = {
        "metadata": {
            "resourceVersion": meta["resourceVersion"],
            "annotations": {vp.CHANGED_ANNOTATION: changed_at},
        }
    }
    path = path_of("v1", "configmaps", meta["name"], meta["namespace"])
    cm["metadata"] = ctx.kube.patch(path, body)["metadata"]
    return changed_at


def _release(ctx: Context, cm: Obj, conf: str | None) -> None:
    """No policy names this Volcano config any more: Tessera's map goes first (a failure
    leaves the conf marked, so the next pass tries again), then its arguments and marks."""
    _delete_map(ctx, cm["metadata"]["namespace"])
    current = (cm.get("data") or {}).get(c.VOLCANO_SCHEDULER_CONFIGMAP_KEY)
    text = conf if conf is not None else current
    if text is None:
        return
    _write_conf(ctx, cm, text, dict.fromkeys(vp.MARKS), {vp.EDITED_LABEL: None})


def _outcome(
    verdict: Verdict, key: ObjectKey, versions: Mapping[str, str] | None = None, **kw: Any
) -> SchedulerOutcome:
    maps = (str(key), f"{key.namespace}/{geometries.NAME}") if verdict.state != "stalled" else ()
    return SchedulerOutcome(verdict, maps, dict(versions or {}), **kw)


def _policy(name: str) -> Ref:
    return Ref(c.API_VERSION, "SharingPolicy", name)


def _cm_path(key: ObjectKey) -> str:
    return path_of("v1", "configmaps", key.name, key.namespace)


def _hami_entries(ctx: Context, demand: VolcanoDemand) -> tuple[dict[str, Mapping[str, Any]], str]:
    """HAMi's ``vnpus`` chip entries by chip name, from the map the policies name (both
    shapes); the second value names the map when it is absent."""
    hami = [p for p in demand.policies if p.uses_hami]
    if not hami:  # MindCluster alone: no HAMi chip entries to take
        return {}, ""
    key = hami[0].hami_config
    cm = ctx.kube.get_or_none(_cm_path(key))
    text = ((cm or {}).get("data") or {}).get(c.HAMI_SCHEDULER_CONFIGMAP_KEY)
    if text is None:
        return {}, f"HAMi's ConfigMap {key} (key {c.HAMI_SCHEDULER_CONFIGMAP_KEY})"
    return vp.hami_entries(text), ""


def _write_conf(
    ctx: Context,
    cm: Obj,
    conf: str,
    notes: Mapping[str, str | None],
    labels: Mapping[str, str | None],
) -> None:
    meta = cm["metadata"]
    body: dict[str, Any] = {
        "metadata": {
            "resourceVersion": meta["resourceVersion"],
            "annotations": dict(notes),
            "labels": dict(labels),
        },
        "data": {c.VOLCANO_SCHEDULER_CONFIGMAP_KEY: conf},
    }
    path = path_of("v1", "configmaps", meta["name"], meta["namespace"])
    written = ctx.kube.patch(path, body)
    cm["metadata"] = written["metadata"]


def _write_map(ctx: Context, namespace: str, doc: Mapping[str, Any]) -> list[str]:
    want = geometries.configmap(namespace, doc)
    path = path_of("v1", "configmaps", geometries.NAME, namespace)
    have = ctx.kube.get_or_none(path)
    if have is None:
        ctx.kube.create(path_of("v1", "configmaps", namespace=namespace), want)
        log.info("Volcano's device config %s/%s created", namespace, geometries.NAME)
        return ["created"]
    if (have.get("data") or {}) != want["data"]:
        rv = have["metadata"]["resourceVersion"]
        body = {"metadata": {"resourceVersion": rv, **want["metadata"]}, "data": want["data"]}
        ctx.kube.patch(path, body)
        log.info("Volcano's device config %s/%s updated", namespace, geometries.NAME)
        return ["updated"]
    return []


def _delete_map(ctx: Context, namespace: str) -> None:
    ctx.kube.delete(path_of("v1", "configmaps", geometries.NAME, namespace))


def _restart(ctx: Context, demand: VolcanoDemand, changed_at: str) -> str:
    """Restart (Automatic) and say what is still pending ("" when every pod read the change)."""
    automatic = any(p.volcano.restart == "Automatic" for p in demand.policies)
    waiting: list[str] = []
    for key, read in sorted(demand.deployments.items()):
        if read is None:
            continue
        deployment = read
        if automatic and restart.due(read, changed_at):
            _rollout_restart(ctx, key, changed_at, demand)
            deployment = ctx.kube.get(_deploy_path(key))
        pods = ctx.kube.list(path_of("v1", "pods", namespace=key.namespace))
        why = restart.pending(deployment, pods, changed_at)
        if why:
            waiting.append(restart.pending_message(key, changed_at, why, automatic))
    return "; ".join(waiting)


def _deploy_path(key: ObjectKey) -> str:
    return path_of("apps/v1", "deployments", key.name, key.namespace)


def _rollout_restart(ctx: Context, key: ObjectKey, changed_at: str, demand: VolcanoDemand) -> None:
    ctx.kube.patch(_deploy_path(key), restart.patch(changed_at))
    text = (
        f"restarted Volcano's scheduler Deployment {key} (as kubectl rollout restart does) "
        f"to read the deviceshare change of {changed_at}"
    )
    log.info("%s", text)
    now: datetime = ctx.clock()
    for p in demand.policies:
        ctx.events.post(_policy(p.policy), "SchedulerRestarted", text, now)
