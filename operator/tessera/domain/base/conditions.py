"""kstatus-compatible conditions, computed purely.

Every kind reports ``Ready`` plus the abnormal-true ``Reconciling`` and
``Stalled`` conditions, which are present only while True (that is what
kstatus, Flux and our Argo CD health check read). ``lastTransitionTime`` moves
only when a condition's status changes, so a converged object's status is
byte-for-byte stable and a resync writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

Status = Literal["True", "False", "Unknown"]
READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"


@dataclass(frozen=True)
class Verdict:
    """What one reconcile concluded about an object, before it becomes conditions.

    ``state`` is one of: ``ready`` (the cluster matches the spec),
    ``progressing`` (work under way, ``reason`` says which) or ``stalled``
    (needs a human). ``extra`` carries kind-specific conditions such as
    ``Overcommitted``.
    """

    state: Literal["ready", "progressing", "stalled"]
    reason: str
    message: str
    extra: tuple[tuple[str, Status, str, str], ...] = ()


# A rollout holding its next node because the drain's pods would have nowhere to run.
INSUFFICIENT_CAPACITY = "InsufficientCapacity"
# A rollout holding its next node because others' unavailable nodes use up maxUnavailable.
BUDGET_HELD_BY_OTHERS = "BudgetHeldByOthers"


def warns(verdict: Verdict) -> bool:
    """Whether the Event for a not-Ready verdict is a Warning: the object is stuck (Stalled),
    or held until someone adds room for the pods a drain would evict, or gives back the
    nodes that use up its disruption budget (a cordon, a taint, a node NotReady)."""
    return verdict.state == "stalled" or verdict.reason in (
        INSUFFICIENT_CAPACITY,
        BUDGET_HELD_BY_OTHERS,
    )


def landed(verdict: Verdict, all_landed: bool) -> Verdict:
    """What a pass may report once it has tried its writes: a pass whose writes did not all
    land (a 409 on a node, an API error) is never Ready, since the plan judged the nodes as
    they would be after those writes — one may still be cordoned, tainted, mid-rollout. The
    next pass re-plans from what really happened. Progressing and Stalled stand as they are.
    """
    if all_landed or verdict.state != "ready":
        return verdict
    why = "a write to a node did not land (see the operator's log); the next pass retries it"
    return Verdict("progressing", "RollingOut", why, verdict.extra)


def timestamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions_for(
    verdict: Verdict,
    generation: int,
    previous: Iterable[Mapping[str, Any]],
    now: datetime,
) -> list[dict[str, Any]]:
    """The full conditions list for ``verdict``, keeping transition times that did not change."""
    wanted: list[tuple[str, Status, str, str]] = []
    if verdict.state == "ready":
        wanted.append((READY, "True", verdict.reason, verdict.message))
    else:
        wanted.append((READY, "False", verdict.reason, verdict.message))
        kind = RECONCILING if verdict.state == "progressing" else STALLED
        wanted.append((kind, "True", verdict.reason, verdict.message))
    wanted.extend(verdict.extra)
    before = {c.get("type"): c for c in previous}
    out: list[dict[str, Any]] = []
    for type_, status, reason, message in wanted:
        old = before.get(type_)
        same = old is not None and old.get("status") == status
        out.append(
            {
                "type": type_,
                "status": status,
                "observedGeneration": generation,
                "lastTransitionTime": old["lastTransitionTime"] if same and old else timestamp(now),
                "reason": reason,
                "message": message,
            }
        )
    return out


def condition(conditions: Iterable[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def kept(previous: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The kind's own conditions (all but Ready, Reconciling and Stalled) exactly as they are,
    ``lastTransitionTime`` included: what a pass that reports no finding of its own (it failed
    before it got there, or its spec cannot be acted on) keeps of what the last one found, so
    an ``Overcommitted`` neither vanishes nor comes back with a new transition time."""
    return [dict(c) for c in previous if c.get("type") not in (READY, RECONCILING, STALLED)]
