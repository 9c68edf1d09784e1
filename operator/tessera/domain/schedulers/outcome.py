"""What the scheduler side concluded for one policy, and how it joins the policy's verdict.

Each part of the scheduler sync (HAMi's device config, Volcano's) answers per policy with a
``SchedulerOutcome``; ``merge`` joins the parts (the worse verdict wins: stalled, then
progressing, then ready), ``overall`` joins the result with the node side's verdict, and
``status`` renders ``status.scheduler``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tessera.domain.base.conditions import Verdict

# Reasons (SharingPolicy conditions).
WAITING_FOR_SCHEDULER = "WaitingForScheduler"  # Reconciling: its config map or Deployment absent
CONFLICT = "Conflict"  # Stalled: two policies disagree on one scheduler's settings
CONFIG_INVALID = "SchedulerConfigInvalid"  # Stalled: a config that does not parse, left as is
CONFIG_UNLOADABLE = (
    "SchedulerConfigUnloadable"  # Stalled: the scheduler could not load it; unwritten
)
VERSION_UNKNOWN = "SchedulerVersionUnknown"  # Stalled: no declared version and no tag
RESTART_PENDING = "RestartPending"  # Reconciling: Volcano must restart to read the change
TRAP = "SchedulerTrap"  # Stalled: a combination that leaves pods Pending
_RANK = {"ready": 0, "progressing": 1, "stalled": 2}


@dataclass(frozen=True)
class SchedulerOutcome:
    """One policy's scheduler side: its verdict and what ``status.scheduler`` shows."""

    verdict: Verdict
    config_maps: tuple[str, ...] = ()
    """ConfigMaps (``namespace/name``) whose Tessera-owned parts match this policy."""
    versions: Mapping[str, str] = field(default_factory=dict)
    """By component: ``"v2.10.0 (image)"``."""
    restart_pending: bool = False
    notes: tuple[str, ...] = ()
    """What this pass wrote for it (one Event ``SchedulerConfigWritten``, and the log)."""


def ready(message: str, **kw: Any) -> SchedulerOutcome:
    return SchedulerOutcome(Verdict("ready", "Applied", message), **kw)


def merge(parts: Iterable[SchedulerOutcome]) -> SchedulerOutcome | None:
    """The parts joined: the worse verdict (equal ones: messages joined), every map and version."""
    found: SchedulerOutcome | None = None
    for part in parts:
        if found is None:
            found = part
            continue
        verdict = _worse(found.verdict, part.verdict)
        maps = tuple(sorted({*found.config_maps, *part.config_maps}))
        versions = {**found.versions, **part.versions}
        pending = found.restart_pending or part.restart_pending
        found = SchedulerOutcome(verdict, maps, versions, pending, (*found.notes, *part.notes))
    return found


def _worse(a: Verdict, b: Verdict) -> Verdict:
    if _RANK[a.state] != _RANK[b.state]:
        return a if _RANK[a.state] > _RANK[b.state] else b
    if a.reason != b.reason or not b.message or a.message == b.message:
        return a
    return Verdict(a.state, a.reason, f"{a.message}; {b.message}", a.extra)


def overall(base: Verdict, outcome: SchedulerOutcome | None) -> Verdict:
    """The policy's verdict with its scheduler side: a not-ready scheduler side wins over a
    node side that is ready or only progressing; a ready one adds its message."""
    if outcome is None:
        return base
    side = outcome.verdict
    if _RANK[side.state] > _RANK[base.state]:
        return Verdict(side.state, side.reason, side.message, base.extra)
    if side.state == "ready" and base.state == "ready" and side.message:
        joined = f"{base.message}; {side.message}" if base.message else side.message
        return Verdict(base.state, base.reason, joined, base.extra)
    return base


def status(name: str, outcome: SchedulerOutcome | None) -> dict[str, Any]:
    """``status.scheduler`` (``admissionPolicy`` is added by the pod-contract step)."""
    found = outcome or SchedulerOutcome(Verdict("progressing", "", ""))
    return {
        "name": name,
        "versions": dict(sorted(found.versions.items())),
        "configMaps": list(found.config_maps),
        "restartPending": found.restart_pending,
    }
