"""What one Volcano scheduler config should hold for the policies naming it: a pure plan.

Input: the policies naming one ``volcano-scheduler-configmap`` (``VolcanoDemand``), the
conf as read (None: the map or its key is absent), whether the Deployments exist, the HAMi
``vnpus`` entries of the chips the policies' pools hold, and what Tessera recorded on the
map before (the argument values it replaced). Output: the conf to write, the geometries
document, the digest of Tessera's part (a new digest is a change Volcano must restart to
read), and one verdict per policy. States, in the order they are decided:

- absent map, key or Deployment      → Reconciling WaitingForScheduler, nothing written
- a policy's Volcano version unknown  → Stalled SchedulerVersionUnknown (that policy); no write
- policies disagree (policy, weight, restart, version) → Stalled Conflict on each, naming the others; no write
- conf does not parse                 → Stalled SchedulerConfigInvalid, line and column; no write
- Volcano too old for the arguments, or VGPUEnable with the legacy GPU modes (fatal at
  Volcano's start)                    → Stalled SchedulerTrap; no write, no restart
- a trap leaving pods Pending         → Stalled SchedulerTrap (written all the same)
- otherwise                           → Ready, warnings (traps that do not block) in the message
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from tessera.api import constants as c
from tessera.domain.base.conditions import Verdict
from tessera.domain.schedulers import traps
from tessera.domain.schedulers.demands import ObjectKey, PolicyDemand, VolcanoDemand
from tessera.domain.schedulers.outcome import (
    CONFIG_INVALID,
    CONFLICT,
    TRAP,
    VERSION_UNKNOWN,
    WAITING_FOR_SCHEDULER,
)
from tessera.domain.schedulers.versions import Version
from tessera.domain.schedulers.volcano import conf as volcano_conf
from tessera.domain.schedulers.volcano import geometries as volcano_geometries

PREVIOUS_ANNOTATION = "tessera.io/deviceshare-previous"
"""On Volcano's map: JSON of the argument values Tessera replaced (null: there was none),
restored when no policy names that scheduler any more."""
DIGEST_ANNOTATION = "tessera.io/deviceshare-digest"
CHANGED_ANNOTATION = "tessera.io/deviceshare-changed-at"
"""When Tessera last wrote the conf (RFC 3339, the API server's time of the write): pods
older than this have not read it."""
EDITED_LABEL = "tessera.io/deviceshare-edited"
"""On a Volcano map Tessera edited: found by a label selector (any namespace, any name) to
give its arguments back once no policy names it (a policy switched to HAMi, dropped
spec.scheduler or named another map)."""
PLUGIN_ADDED = "tessera.io/plugin-added"
"""In PREVIOUS_ANNOTATION: the conf had no deviceshare plugin; Tessera's entry goes again."""
CONFIG_ADDED = "tessera.io/init-params-added"
"""In PREVIOUS_ANNOTATION: the conf had no ``init-params`` configuration; Tessera's goes again."""
MARKS = (PREVIOUS_ANNOTATION, DIGEST_ANNOTATION, CHANGED_ANNOTATION)


def edited(cm: Mapping[str, Any]) -> bool:
    """Whether Tessera's edit is on this Volcano map (its label or any of its annotations)."""
    meta = cm.get("metadata") or {}
    notes = meta.get("annotations") or {}
    return EDITED_LABEL in (meta.get("labels") or {}) or any(k in notes for k in MARKS)


@dataclass(frozen=True)
class VolcanoPlan:
    verdicts: Mapping[str, Verdict]
    conf: str | None = None  # the conf to write; None: leave it as it is
    geometries: Mapping[str, Any] | None = None  # Tessera's map's document; None: no write
    digest: str = ""  # of Tessera's part; "" when nothing is to be written
    previous: Mapping[str, Any] = field(default_factory=dict)  # for PREVIOUS_ANNOTATION
    warnings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # policy → traps
    version: str = ""


def wanted_arguments(
    policies: tuple[PolicyDemand, ...], namespace: str
) -> dict[str, volcano_conf.Scalar | None]:
    """The deviceshare arguments Tessera sets (None: leaves untouched)."""
    first = policies[0].volcano
    ascend = any(p.ascend for p in policies)
    mindcluster = any(p.mindcluster for p in policies)
    nvidia = any(p.hami_core is not None for p in policies)
    return {
        volcano_conf.ENABLE_VNPU: True if ascend else None,
        volcano_conf.ENABLE_MINDCLUSTER: True if mindcluster else None,
        # MindCluster's dynamic vNPU: Volcano creates no preset vNPU view (a string there)
        volcano_conf.PRESET_VIRTUAL_DEVICE: "false" if mindcluster else None,
        volcano_conf.ENABLE_VGPU: True if nvidia else None,
        volcano_conf.POLICY: first.policy,
        volcano_conf.WEIGHT: first.weight,
        volcano_conf.CM_NAME: volcano_geometries.NAME,
        volcano_conf.CM_NAMESPACE: namespace,
    }


def plan(
    demand: VolcanoDemand,
    conf: str | None,
    entries: Mapping[str, Mapping[str, Any]],
    previous: Mapping[str, Any],
    hami_missing: str = "",
) -> VolcanoPlan:
    """The plan for one Volcano config (see the module's table). ``entries``: HAMi ``vnpus``
    entries by chip name; ``previous``: the PREVIOUS_ANNOTATION as read; ``hami_missing``
    names HAMi's map when it is absent (the chip entries come from it)."""
    where = str(demand.config_map)
    names = [p.policy for p in demand.policies]
    if not demand.policies:
        return _release(conf, previous)
    missing = (
        [f"ConfigMap {where} (key {c.VOLCANO_SCHEDULER_CONFIGMAP_KEY})"] if conf is None else []
    )
    missing += [f"Deployment {k}" for k, d in sorted(demand.deployments.items()) if d is None]
    missing += [hami_missing] if hami_missing else []
    if missing:
        text = f"not found: {', '.join(missing)}; nothing written until they exist"
        return VolcanoPlan({n: Verdict("progressing", WAITING_FOR_SCHEDULER, text) for n in names})
    assert conf is not None
    unknown = {p.policy: p.unknown["volcano"] for p in demand.policies if "volcano" in p.unknown}
    if unknown:
        return VolcanoPlan(
            {
                n: Verdict(
                    "stalled", VERSION_UNKNOWN, unknown.get(n) or next(iter(unknown.values()))
                )
                for n in names
            }
        )
    clash = _conflict(demand.policies, where) or _versions_differ(demand.policies, where)
    if clash:
        return VolcanoPlan({n: Verdict("stalled", CONFLICT, clash) for n in names})
    detected = min((p.versions["volcano"] for p in demand.policies), key=lambda d: d.version)
    version = detected.version
    wanted = wanted_arguments(demand.policies, demand.config_map.namespace)
    # an argument no policy sets any more goes back to what it was (None: Tessera never set
    # it, the person's value stays)
    given_back = {k: previous[k] for k, v in wanted.items() if v is None and k in previous}
    asked = {k: v for k, v in wanted.items() if v is not None} | given_back
    try:
        before = volcano_conf.arguments(conf) | {
            volcano_conf.CONFIG_PREFIX + k: x for k, x in volcano_conf.configuration(conf).items()
        }
        new_conf = volcano_conf.edit(conf, asked)
    except volcano_conf.ConfInvalid as err:
        text = f"{where}: {err}; left untouched"
        return VolcanoPlan({n: Verdict("stalled", CONFIG_INVALID, text) for n in names})
    fatal = traps.found(
        traps.arguments_too_old(
            version,
            bool(wanted[volcano_conf.ENABLE_VNPU]),
            bool(wanted[volcano_conf.ENABLE_MINDCLUSTER]),
        ),
        traps.vgpu_fatal(bool(wanted[volcano_conf.ENABLE_VGPU]), before, where),
    )
    if fatal:  # writing would crash Volcano or change nothing it reads: no write
        text = "; ".join(t.message for t in fatal)
        return VolcanoPlan({n: Verdict("stalled", TRAP, text) for n in names})
    recorded = {k: v for k, v in previous.items() if k not in given_back}
    if not recorded and not volcano_conf.has_plugin(conf):
        recorded[PLUGIN_ADDED] = True  # the entry goes again when given back
    if (
        wanted[volcano_conf.PRESET_VIRTUAL_DEVICE] is not None
        and CONFIG_ADDED not in recorded
        and volcano_conf.PRESET_VIRTUAL_DEVICE not in recorded
        and volcano_conf.INIT_PARAMS not in _configuration_names(conf)
    ):
        recorded[CONFIG_ADDED] = True
    for key, value in wanted.items():
        if value is not None and key not in recorded:
            recorded[key] = before.get(key)
    doc = _geometries(demand.policies, entries, version)
    digest = _digest({k: v for k, v in wanted.items() if v is not None}, doc)
    weight = _int(before.get(volcano_conf.WEIGHT))  # kept when no policy sets one
    verdicts, warnings = _verdicts(demand.policies, entries, version, where, weight)
    return VolcanoPlan(verdicts, new_conf, doc, digest, recorded, warnings, str(detected))


def one_map_per_namespace(demands: Mapping[ObjectKey, VolcanoDemand]) -> dict[str, Verdict]:
    """Tessera's geometries map is one per namespace: two Volcano confs in one namespace,
    each named by policies, would flip it between them — a Conflict on every policy naming
    either (nothing written for them)."""
    by_namespace: dict[str, list[VolcanoDemand]] = {}
    for key, one in sorted(demands.items()):
        if one.policies:
            by_namespace.setdefault(key.namespace, []).append(one)
    out: dict[str, Verdict] = {}
    for namespace, ones in by_namespace.items():
        if len(ones) < 2:
            continue
        said = "; ".join(
            f"{one.config_map} by {', '.join(sorted(p.policy for p in one.policies))}"
            for one in ones
        )
        text = (
            f"two Volcano configs in namespace {namespace} would share Tessera's map "
            f"{namespace}/{volcano_geometries.NAME}: {said}; name one of them only"
        )
        out |= {p.policy: Verdict("stalled", CONFLICT, text) for one in ones for p in one.policies}
    return out


def hami_entries(text: str) -> dict[str, Mapping[str, Any]]:
    """HAMi's ``vnpus`` chip entries by chip name, from its ``device-config.yaml`` (either
    shape); {} when it does not parse (the HAMi part reports that)."""
    try:
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return {}
    vnpus = loaded.get("vnpus") if isinstance(loaded, Mapping) else None
    configs = (vnpus.get("configs") or []) if isinstance(vnpus, Mapping) else (vnpus or [])
    return {str(e.get("chipName")): e for e in configs if isinstance(e, Mapping)}


def _release(conf: str | None, previous: Mapping[str, Any]) -> VolcanoPlan:
    """No policy names this Volcano any more: Tessera's argument values go back to what they
    were (an argument it added goes)."""
    if conf is None or not previous:
        return VolcanoPlan({})
    values = {k: v for k, v in previous.items() if k not in (PLUGIN_ADDED, CONFIG_ADDED)}
    try:
        restored = volcano_conf.edit(conf, values)
        if previous.get(PLUGIN_ADDED):
            restored = volcano_conf.remove_plugin(restored)
        if previous.get(CONFIG_ADDED):
            restored = volcano_conf.remove_configuration(restored)
    except volcano_conf.ConfInvalid:
        return VolcanoPlan({})  # unparseable now: a person's edit, left as it is
    return VolcanoPlan({}, restored)


def _configuration_names(conf: str) -> set[str]:
    loaded = yaml.safe_load(conf) or {}
    entries = loaded.get("configurations") if isinstance(loaded, Mapping) else None
    return {str(e.get("name")) for e in entries or [] if isinstance(e, Mapping)}


def _conflict(policies: tuple[PolicyDemand, ...], where: str) -> str:
    asks = {(p.volcano.policy, p.volcano.weight, p.volcano.restart) for p in policies}
    if len(asks) < 2:
        return ""
    said = ", ".join(
        f"SharingPolicy {p.policy} asks {p.volcano.policy}"
        + (f" weight {p.volcano.weight}" if p.volcano.weight is not None else " without weight")
        + f" restart {p.volcano.restart}"
        for p in sorted(policies, key=lambda p: p.policy)
    )
    return (
        f"policies naming Volcano's {where} disagree on deviceshare.SchedulePolicy/"
        f"ScheduleWeight or on who restarts Volcano (restart): {said}"
    )


def _versions_differ(policies: tuple[PolicyDemand, ...], where: str) -> str:
    """Policies naming one Volcano that declare different versions of it (as HAMi's part
    does: a Conflict, not the oldest silently)."""
    found = {p.policy: p.versions["volcano"] for p in policies if "volcano" in p.versions}
    if len({d.version for d in found.values()}) < 2:
        return ""
    said = ", ".join(f"SharingPolicy {n} says {d}" for n, d in sorted(found.items()))
    return f"policies naming Volcano's {where} disagree on its version: {said}"


def _geometries(
    policies: tuple[PolicyDemand, ...],
    entries: Mapping[str, Mapping[str, Any]],
    at: Version,
) -> dict[str, Any]:
    chips = sorted({c for p in policies if p.uses_hami for c in p.chips if c in entries})
    cores = [p.hami_core for p in sorted(policies, key=lambda p: p.policy) if p.hami_core]
    nvidia = None
    if cores:
        nvidia = {
            "deviceSplitCount": cores[0].device_split_count,
            "deviceMemoryScaling": cores[0].device_memory_scaling,
            "deviceCoreScaling": cores[0].device_core_scaling,
        }
    soft = any(p.soft_slicing for p in policies)
    return volcano_geometries.document(
        at, [entries[c] for c in chips], hami_vnpu_core=soft, nvidia=nvidia
    )


def _verdicts(
    policies: tuple[PolicyDemand, ...],
    entries: Mapping[str, Mapping[str, Any]],
    at: Version,
    where: str,
    kept_weight: int | None = None,
) -> tuple[dict[str, Verdict], dict[str, tuple[str, ...]]]:
    verdicts: dict[str, Verdict] = {}
    warnings: dict[str, tuple[str, ...]] = {}
    for p in policies:
        found = traps.found(
            traps.soft_slicing_too_old(at, p.soft_slicing),
            traps.chips_without_entry(
                {c: [p.policy] for c in (p.chips if p.uses_hami else ())}, entries
            ),
            traps.weight_skips_binpack(
                p.volcano.policy, p.volcano.weight if p.volcano.weight is not None else kept_weight
            ),
            traps.ignored_keys(entries[c] for c in p.chips if c in entries and p.uses_hami),
        )
        stuck = [t.message for t in found if t.stuck]
        warnings[p.policy] = tuple(t.message for t in found if not t.stuck)
        if stuck:
            verdicts[p.policy] = Verdict("stalled", TRAP, "; ".join(stuck))
        else:
            text = f"Volcano's {where} deviceshare arguments and its device config match"
            verdicts[p.policy] = Verdict("ready", "Applied", "; ".join((text, *warnings[p.policy])))
    return verdicts, warnings


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _digest(arguments: Mapping[str, Any], doc: Mapping[str, Any]) -> str:
    text = json.dumps({"arguments": arguments, "geometries": doc}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
