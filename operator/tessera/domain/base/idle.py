"""Whether a pass may be skipped: its inputs are those of the last pass that changed nothing.

A resync pass of a converged object used to read and re-plan every Node of the cluster
(about 1 CPU-second per round of two SharingPolicies at 2,000 nodes) to conclude, again,
that nothing was to be done. A pass is a function of what it reads, so when a cheap
summary of its inputs (``Inputs``: the object's resourceVersion, the other objects it
reads, the ConfigMaps' resourceVersions, and a counter of Node changes kept from the
watch, bumped only when a field a decision reads changes — ``node_fingerprint``) equals
the summary taken before the last pass that wrote nothing and waits for nothing, the pass
would decide the same: it is skipped. Drift made by hand is a change of one of these
inputs, so it is never skipped; a full pass still runs at least every ``full_every``
seconds, whatever the watches said (a lost watch event, a bug). Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from tessera.domain.base.conditions import Verdict

Inputs = tuple[Hashable, ...]
"""What one pass reads, summarised; equal inputs, equal decisions (the clock aside)."""


@dataclass(frozen=True)
class Converged:
    """The last full pass that wrote nothing and waits for nothing: its inputs, and when."""

    inputs: Inputs
    at: float  # monotonic seconds


def converged(verdict: Verdict, *, wrote: bool, requeue_after: float | None, starved: bool) -> bool:
    """Whether a pass found nothing to do that time alone could change.

    A progressing object (a rollout in flight, a gate — window, approval, pause — or a
    drain waiting) may move with the clock alone: it is never skipped.
    """
    if wrote or requeue_after is not None or starved:
        return False  # it moved something, or asked to look again soon
    return verdict.state != "progressing"  # ready or stalled: only a change of input moves it


def skip(last: Converged | None, inputs: Inputs | None, now: float, full_every: float) -> bool:
    """Whether the pass about to run may be skipped (``now``: monotonic seconds)."""
    if inputs is None:
        return False  # what it reads is not followed by a watch (yet): run it
    if last is None:
        return False  # no pass converged since the start, or the last one changed something
    if last.inputs != inputs:
        return False  # something it reads changed: a new object, a spec, drift by hand
    return now - last.at < full_every  # unchanged: skip, but run a full pass now and then


def node_fingerprint(body: Mapping[str, Any]) -> Hashable:
    """The parts of a Node that Tessera's decisions read; heartbeats do not change it."""
    meta, spec = body.get("metadata") or {}, body.get("spec") or {}
    status = body.get("status") or {}
    ready = [x.get("status") for x in status.get("conditions") or [] if x.get("type") == "Ready"]
    return (
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted((meta.get("annotations") or {}).items())),
        bool(spec.get("unschedulable")),
        repr(spec.get("taints")),
        tuple(sorted((status.get("allocatable") or {}).items())),
        tuple(ready),
    )


def slim_node(body: Mapping[str, Any]) -> dict[str, Any]:
    """The Node with only what a decision reads (``cluster.objects.node_view``, ``sharing_facts``):
    a listed Node carries ten times more (managedFields, images, nodeInfo, conditions) that
    a pass would otherwise hold for every node of the cluster at once."""
    meta, spec = body.get("metadata") or {}, body.get("spec") or {}
    status = body.get("status") or {}
    ready = [x for x in status.get("conditions") or [] if x.get("type") == "Ready"]
    kept = ("name", "uid", "resourceVersion", "labels", "annotations", "deletionTimestamp")
    return {
        "metadata": {k: meta[k] for k in kept if k in meta},
        "spec": {k: spec[k] for k in ("unschedulable", "taints") if k in spec},
        "status": {
            **{k: status[k] for k in ("allocatable", "capacity") if k in status},
            "conditions": [{"type": "Ready", "status": x.get("status")} for x in ready],
        },
    }
