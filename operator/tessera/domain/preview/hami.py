"""The HAMi part of a preview: what Tessera writes into ``hami-scheduler-device``.

For every HAMi device config the SharingPolicies name once the manifests are applied (and
every one a policy named before, so a deleted or pruned policy's fields are seen to go), the
same plan the operator makes (``schedulers.hami.want.join`` of the same demands, ``schedulers.hami.config.plan``
of the same text): the diff of ``device-config.yaml``; that HAMi's scheduler must be
restarted to read it, and the traps, as notes.

An answer the plan cannot give is an error (exit 1), never "no changes": a map or (for a
policy naming HAMi) a Deployment the cluster read does not hold, an unknown version, two
policies disagreeing, a file that does not parse or cannot be edited safely.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tessera.api import constants as c
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.preview.model import Cluster, Raw
from tessera.domain.preview.results import unified
from tessera.domain.preview.schedulers import SchedulerPreviews, find_deployment, governed_labels
from tessera.domain.preview.sharing import policies as sharing_policies
from tessera.domain.schedulers import ObjectKey, PolicyDemand, demands, outcome
from tessera.domain.schedulers.hami import load as hami_load
from tessera.domain.schedulers.hami import owned as hami_owned
from tessera.domain.schedulers.hami import restart as hami_restart
from tessera.domain.schedulers.hami.config import Want, plan, present_chips
from tessera.domain.schedulers.hami.want import Joined, join
from tessera.domain.schedulers.outcome import TRAP
from tessera.domain.schedulers.versions import Component, Detected, VersionUnknownError, detect
from tessera.domain.schedulers.yaml_text import YamlInvalidError
from tessera.domain.sharing.planning import SharingPlan

KEY = c.HAMI_SCHEDULER_CONFIGMAP_KEY
ANNOTATION = c.HAMI_SCHEDULER_MANAGED_ANNOTATION
DEFAULT = ObjectKey(c.HAMI_NAMESPACE, c.HAMI_SCHEDULER_CONFIGMAP_NAME)


def previews(before: Cluster, after: Cluster, plan_: SharingPlan) -> SchedulerPreviews:
    grouped: dict[ObjectKey, list[PolicyDemand]] = {}
    for policy in sharing_policies(before):  # a map a policy leaves: its fields go
        if policy.spec.scheduler is not None:
            grouped.setdefault(ObjectKey.of(policy.spec.scheduler.hami.config_map), [])
    if before.configmap((DEFAULT.namespace, DEFAULT.name)) is not None:
        grouped.setdefault(DEFAULT, [])
    for policy in sharing_policies(after):
        scheduler = policy.spec.scheduler
        if scheduler is None:
            continue
        labels = governed_labels(after, plan_, policy.name)
        found, unknown = _versions(before, policy.spec)
        asked = demands.demand(policy.name, policy.spec, scheduler, labels, found, unknown)
        grouped.setdefault(asked.hami_config, []).append(asked)
    out: list[SchedulerPreviews] = [
        _one(before, key, named) for key, named in sorted(grouped.items())
    ]
    return SchedulerPreviews(
        tuple(d for p in out for d in p.configs),
        {k: v for p in out for k, v in p.errors.items()},
        {k: v for p in out for k, v in p.notes.items()},
    )


def _one(before: Cluster, key: ObjectKey, named: Sequence[PolicyDemand]) -> SchedulerPreviews:
    """One HAMi device config: the operator's plan for it, as a diff, errors and notes."""
    cm = before.configmap((key.namespace, key.name))
    errors = {
        d.policy: (f"WaitingForScheduler: {why}",)
        for d in named
        if (why := _absent(before, key, d, cm))
    }
    if cm is None or errors:
        return SchedulerPreviews((), errors)
    text = str((cm.get("data") or {}).get(KEY, ""))
    owned = hami_owned.parse(cm["metadata"].get("annotations"), ANNOTATION)
    where = f"{key} ({KEY})"
    try:
        joined = join(where, named, present_chips(text)) if named else Joined(Want(None))
        edit = plan(text, owned, joined.want) if joined.want is not None else None
    except hami_load.Unloadable as err:
        message = f"{outcome.CONFIG_UNLOADABLE}: {hami_load.said(where, err)}"
        return SchedulerPreviews((), {d.policy: (message,) for d in named})
    except YamlInvalidError as err:
        message = f"SchedulerConfigInvalid: {where} cannot be edited at {err}; left as it is"
        return SchedulerPreviews((), {d.policy: (message,) for d in named})
    notes: dict[str, tuple[str, ...]] = {}
    for d in named:
        verdict = joined.verdicts.get(d.policy)
        if verdict is None:
            continue
        line = f"{verdict.reason}: {verdict.message}"
        if verdict.reason == TRAP:
            notes[d.policy] = (*notes.get(d.policy, ()), line)
        else:
            errors[d.policy] = (*errors.get(d.policy, ()), line)
    diff = unified(f"{key}/{KEY}", text, edit.text) if edit is not None else None
    for d in named:
        for note in _hami_notes(before, d, diff is not None):
            notes[d.policy] = (*notes.get(d.policy, ()), note)
    return SchedulerPreviews(() if diff is None else (diff,), errors, notes)


def _absent(before: Cluster, key: ObjectKey, d: PolicyDemand, cm: Raw | None) -> str:
    if cm is None:
        return f"ConfigMap {key} (HAMi's device config) does not exist; nothing created"
    where = ObjectKey.of(d.scheduler.hami.deployment)
    if d.scheduler.name == "HAMi" and find_deployment(before, where) is None:
        return f"HAMi's scheduler Deployment {where} does not exist; nothing written to {key}"
    return ""


def _hami_notes(before: Cluster, d: PolicyDemand, changed: bool) -> Iterable[str]:
    """For a policy naming HAMi: the restart the change needs; ``--enable-ascend`` missing."""
    if d.scheduler.name != "HAMi":
        return
    key = ObjectKey.of(d.scheduler.hami.deployment)
    deployment = find_deployment(before, key)
    if deployment is not None and d.chips and not hami_restart.ascend_enabled(deployment):
        yield f"{TRAP}: {hami_restart.ascend_trap(key, d.chips)}"
    if changed:
        yield (
            f"RestartPending: HAMi's scheduler reads its device config only at start: restart "
            f"it after the change (kubectl -n {key.namespace} rollout restart "
            f"deployment/{key.name})"
        )


def _versions(
    cluster: Cluster, spec: SharingPolicySpec
) -> tuple[dict[Component, Detected], dict[Component, str]]:
    scheduler = spec.scheduler
    if scheduler is None:
        return {}, {}
    key = ObjectKey.of(scheduler.hami.deployment)
    try:
        deployment = find_deployment(cluster, key)
        return {"hami": detect("hami", scheduler.hami.version, deployment, str(key))}, {}
    except VersionUnknownError as err:
        return {}, {"hami": str(err)}
