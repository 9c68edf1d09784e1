"""HAMi's scheduler device config (``hami-scheduler-device``, key ``device-config.yaml``):
Tessera's fields kept consistent with the policies, every line people wrote kept.

Called once per pass by ``controllers.schedulers.sync`` (its lock makes it the one writer).
Each map the policies name is read, planned (``domain.schedulers.hami.want`` joins the asks,
``schedulers.hami.config`` edits the text) and patched with the resourceVersion it was read at; a 409 is
a race and the map is read and planned again. Nothing is ever created: a missing map, or a
missing scheduler Deployment for a policy naming HAMi, is ``WaitingForScheduler``; a file that
does not parse is left as it is (``SchedulerConfigInvalid``, with line and column), and so is
one HAMi's version could not load once planned — a person's entry of another version's shape
(``SchedulerConfigUnloadable``, naming the entry and the version; ``domain.schedulers.hami.load``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tessera.adapters.kube import ApiError, Obj, path_of
from tessera.api import constants as c
from tessera.controllers.runtime import Context
from tessera.controllers.schedulers.hami import read as hami_read
from tessera.domain.base.conditions import Verdict
from tessera.domain.base.failures import Failure
from tessera.domain.schedulers import ObjectKey, PolicyDemand, SchedulerOutcome, outcome
from tessera.domain.schedulers.hami import load as hami_load
from tessera.domain.schedulers.hami import owned as hami_owned
from tessera.domain.schedulers.hami.config import Want, plan, present_chips
from tessera.domain.schedulers.hami.guard import NotEditable
from tessera.domain.schedulers.hami.want import Joined, join
from tessera.domain.schedulers.yaml_text import YamlInvalidError

log = logging.getLogger("tessera.schedulers")
ATTEMPTS = 5
KEY = c.HAMI_SCHEDULER_CONFIGMAP_KEY
ANNOTATION = c.HAMI_SCHEDULER_MANAGED_ANNOTATION
Deployments = Mapping[ObjectKey, Mapping[str, Any] | None]


@dataclass(frozen=True)
class Answered:
    outcomes: dict[str, SchedulerOutcome] = field(default_factory=dict)
    failures: dict[str, Failure] = field(default_factory=dict)
    """By policy (``""``: a map only a deleted policy named): its map's API error."""


def sync(
    ctx: Context,
    demands: Sequence[PolicyDemand],
    deployments: Deployments,
    released: Iterable[ObjectKey] = (),
) -> Answered:
    """Make each named HAMi device config match its policies; each policy's outcome by name.
    ``released``: configs looked at even when no policy names them (HAMi's default map, the
    one a deleted policy named), so Tessera's fields there go.
    An API error on one map is that map's policies' failure; the other maps go on."""
    grouped: dict[ObjectKey, list[PolicyDemand]] = {key: [] for key in released}
    for one in demands:
        grouped.setdefault(one.hami_config, []).append(one)
    out = Answered()
    for key, named in sorted(grouped.items()):
        waiting = _waiting(key, named, deployments)
        if waiting is not None:
            out.outcomes.update({d.policy: SchedulerOutcome(waiting) for d in named})
            continue
        try:
            out.outcomes.update(_one(ctx, key, named, deployments))
        except ApiError as err:
            log.warning("HAMi scheduler config %s not synced: %s", key, err)
            failed = Failure(err.status, str(err))
            out.failures.update({d.policy: failed for d in named} or {"": failed})
        except Exception as err:  # one map's surprise never fails every policy's pass
            log.exception("HAMi scheduler config %s not planned", key)
            text = f"Tessera could not plan its edit of {key} ({KEY}): {err}; left as it is"
            verdict = Verdict("stalled", outcome.CONFIG_INVALID, text)
            out.outcomes.update({d.policy: SchedulerOutcome(verdict) for d in named})
    return out


def _waiting(
    key: ObjectKey, named: Sequence[PolicyDemand], deployments: Deployments
) -> Verdict | None:
    """A policy naming HAMi whose scheduler Deployment is absent holds the whole map."""
    for d in named:
        where = ObjectKey.of(d.scheduler.hami.deployment)
        if d.scheduler.name == "HAMi" and deployments.get(where) is None:
            text = (
                f"HAMi's scheduler Deployment {where} does not exist (install HAMi or point "
                f"spec.scheduler.hami.deployment at it); nothing written to {key}"
            )
            return Verdict("progressing", outcome.WAITING_FOR_SCHEDULER, text)
    return None


def _one(
    ctx: Context, key: ObjectKey, named: Sequence[PolicyDemand], deployments: Deployments
) -> dict[str, SchedulerOutcome]:
    path = path_of("v1", "configmaps", key.name, key.namespace)
    for _ in range(ATTEMPTS):
        obj = ctx.kube.get_or_none(path)
        if obj is None:
            text = (
                f"ConfigMap {key} (HAMi's device config) does not exist: install HAMi or point "
                "spec.scheduler.hami.configMap at it; nothing created"
            )
            verdict = Verdict("progressing", outcome.WAITING_FOR_SCHEDULER, text)
            return {d.policy: SchedulerOutcome(verdict) for d in named}
        try:
            return _planned(ctx, key, path, obj, named, deployments)
        except ApiError as err:
            if not err.conflict:
                raise
            log.info("%s changed while Tessera wrote it (%s); re-planning", key, err)
    raise ApiError(409, "Conflict", f"ConfigMap {key} kept changing while Tessera wrote it")


def _planned(
    ctx: Context,
    key: ObjectKey,
    path: str,
    obj: Obj,
    named: Sequence[PolicyDemand],
    deployments: Deployments,
) -> dict[str, SchedulerOutcome]:
    text = str((obj.get("data") or {}).get(KEY, ""))
    owned = hami_owned.parse(obj["metadata"].get("annotations"), ANNOTATION)
    where = f"{key} ({KEY})"
    try:
        present = present_chips(text)
        joined = join(where, named, present) if named else Joined(Want(None))
        edit = plan(text, owned, joined.want) if joined.want is not None else None
    except hami_load.Unloadable as err:
        message = hami_load.said(where, err)
        log.warning("%s", message)
        verdict = Verdict("stalled", outcome.CONFIG_UNLOADABLE, message)
        return {d.policy: SchedulerOutcome(verdict) for d in named}
    except YamlInvalidError as err:
        said = "cannot be edited" if isinstance(err, NotEditable) else "does not parse"
        message = f"{where} {said} at {err}; Tessera leaves it as it is"
        if named:  # a map no policy names is looked at only to release Tessera's fields
            log.warning("%s", message)
        verdict = Verdict("stalled", outcome.CONFIG_INVALID, message)
        return {d.policy: SchedulerOutcome(verdict) for d in named}
    if edit is not None and (edit.changed(text) or edit.owned.annotation() != _mark(obj)):
        patch = {
            "metadata": {
                "resourceVersion": obj["metadata"]["resourceVersion"],
                "annotations": {
                    ANNOTATION: edit.owned.annotation(),
                    **(hami_read.unstamped(edit.text) if edit.changed(text) else {}),
                },
            },
            "data": {KEY: edit.text},
        }
        obj, text = ctx.kube.patch(path, patch), edit.text
        for note in edit.notes:
            log.info("%s: %s", where, note)
    hamis = {
        ObjectKey.of(d.scheduler.hami.deployment): None for d in named if d.scheduler.name == "HAMi"
    }
    schedulers = {k: deployments.get(k) for k in sorted(hamis)}
    changed = hami_read.stamp(ctx, path, obj, text, keep=bool(named), schedulers=schedulers)
    notes = tuple(f"{where}: {n}" for n in edit.notes) if edit is not None else ()
    versions = {"hami": str(joined.version)} if joined.version else {}
    out: dict[str, SchedulerOutcome] = {}
    for d in named:
        planned = joined.verdicts.get(d.policy) or _ready(where, joined)
        verdict, pending = hami_read.verdict(ctx, d, deployments, changed, planned)
        maps = () if d.policy in joined.verdicts else (str(key),)
        out[d.policy] = SchedulerOutcome(verdict, maps, versions, pending, notes)
    return out


def _ready(where: str, joined: Joined) -> Verdict:
    want = joined.want or Want(None)
    parts = []
    if want.chips:
        parts.append(f"vnpus entries for {', '.join(want.chips)}")
    if want.hami_vnpu_core is not None:
        parts.append(f"hamiVnpuCore {str(want.hami_vnpu_core).lower()}")
    if want.nvidia:
        parts.append("nvidia " + ", ".join(f"{k} {v}" for k, v in want.nvidia.items()))
    what = "; ".join(parts) or "nothing of Tessera's"
    return Verdict("ready", "Applied", f"{where} holds {what} (HAMi {joined.version})")


def _mark(obj: Obj) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(ANNOTATION)
