"""One write for a run of one node's actions: they land together or not at all.

The rollout engine plans small steps — persist the state, taint, cordon;
later lift the taint, uncordon, clear the state — ordered so that stopping
after any of them is safe. Sent one by one, a node's release is five round
trips (the taint edit needs a read) and five watch events for every other
controller to process. Folded into one merge patch, in order, it is one read
and one write, and atomic: a crash leaves all of it or none, which is every
bit as safe as any prefix.

Taints are a list, which a merge patch replaces whole, so a run that edits
them carries the node's ``resourceVersion`` from a fresh read: a concurrent
writer makes it fail with 409 instead of being overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tessera.domain import rollout

PATCHABLE = (
    rollout.SetNodeState,
    rollout.ClearNodeState,
    rollout.Cordon,
    rollout.Uncordon,
    rollout.SetNodeLabels,
    rollout.AddTaint,
    rollout.RemoveTaint,
)
Taints = list[dict[str, Any]]


def runs(actions: Sequence[rollout.Action]) -> list[list[rollout.Action]]:
    """One node's actions cut into runs: consecutive node patches together, others alone."""
    out: list[list[rollout.Action]] = []
    for action in actions:
        if out and isinstance(action, PATCHABLE) and isinstance(out[-1][-1], PATCHABLE):
            out[-1].append(action)
        else:
            out.append([action])
    return out


def edits_taints(run: Sequence[rollout.Action]) -> bool:
    return any(isinstance(a, rollout.AddTaint | rollout.RemoveTaint) for a in run)


def compose(
    run: Sequence[rollout.Action], taints: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The merge patch doing ``run`` in order; ``{}`` when it changes nothing.

    ``taints`` is the node's current list, read only when the run edits taints.
    """
    annotations: dict[str, str | None] = {}
    labels: dict[str, str | None] = {}
    spec: dict[str, Any] = {}
    before: Taints = [dict(t) for t in taints]
    after = list(before)
    for action in run:
        match action:
            case rollout.SetNodeState() | rollout.ClearNodeState():
                annotations.update(action.annotations)
            case rollout.Cordon():
                spec["unschedulable"] = True
            case rollout.Uncordon():
                spec["unschedulable"] = None
            case rollout.SetNodeLabels():
                labels.update(action.labels)
            case rollout.AddTaint() | rollout.RemoveTaint():
                after = _taint(after, action)
            case _:
                raise ValueError(f"not a node patch: {rollout.describe(action)}")
    if after != before:
        spec["taints"] = after or None
    meta = {k: v for k, v in (("annotations", annotations), ("labels", labels)) if v}
    return {k: v for k, v in (("metadata", meta), ("spec", spec)) if v}


def _taint(taints: Taints, action: rollout.AddTaint | rollout.RemoveTaint) -> Taints:
    key, effect, value = action.taint.key, action.taint.effect, action.taint.value
    kept = [t for t in taints if not (t.get("key") == key and t.get("effect") == effect)]
    if isinstance(action, rollout.RemoveTaint):
        return kept
    existing = [t for t in taints if t.get("key") == key and t.get("effect") == effect]
    added = {"key": key, "effect": effect, **({"value": value} if value else {})}
    if existing == [added]:
        return taints  # already there as wanted: keep the list (and its order) as it is
    return [*kept, added]
