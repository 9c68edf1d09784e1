"""Turning one pass's per-node results into what users read: counts, problems, a Verdict.

Messages name the node, the pod, the PDB or the rule, because the reader is a
person deciding what to do (docs/architecture.md §Status and conditions). Problems are bounded so a
large broken pool cannot blow up the object's status.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tessera.api.v1alpha1.common import NodeCounts, NodeProblem, NodeScope
from tessera.domain.base.conditions import Verdict
from tessera.domain.dra.verdicts import WAITING_FOR_DRIVER, waiting_text
from tessera.domain.rollout.draining import Held
from tessera.domain.rollout.scope import Scope, gpu_list
from tessera.domain.rollout.state import ReportPhase

MAX_PROBLEMS = 20
SEVERITY = {"NodeFailed": 0, "DrainBlocked": 1, "InvalidGeometryForModel": 2}
IN_PROGRESS = (
    ReportPhase.CORDONED,
    ReportPhase.DRAINING,
    ReportPhase.APPLYING,
    ReportPhase.VERIFYING,
    ReportPhase.UNCORDONING,
)


@dataclass(frozen=True)
class NodeReport:
    """One pool node after this pass: for status, metrics (nodes by phase) and logs."""

    name: str
    phase: ReportPhase
    target: str
    message: str = ""
    held: tuple[Held, ...] = ()
    """Pods a PodDisruptionBudget keeps on the node while it drains."""
    no_driver: bool = False
    """A DRA node whose driver publishes no complete pool: Updated as far as its labels
    tell, or Pending a layout change that cannot start before the driver runs."""
    scope: Scope | None = None
    """How much of the node the change in flight takes (its record's ``gpus``, ``whole``)."""

    def shown(self) -> str:
        """``gpu-3 Draining``, and while a PDB holds pods up, which pods and which PDBs."""
        text = f"{self.name} {self.phase.value}"
        if not self.held:
            return text
        more = f"; and {len(self.held) - 2} more" if len(self.held) > 2 else ""
        return f"{text} ({'; '.join(str(h) for h in self.held[:2])}{more})"


def counts(reports: Sequence[NodeReport]) -> NodeCounts:
    by = Counter(r.phase for r in reports)
    return NodeCounts(
        total=len(reports),
        updated=by[ReportPhase.UPDATED],
        in_progress=sum(by[p] for p in IN_PROGRESS),
        pending=by[ReportPhase.PENDING],
        blocked=by[ReportPhase.BLOCKED],
        failed=by[ReportPhase.FAILED],
    )


def scopes(reports: Sequence[NodeReport]) -> tuple[NodeScope, ...]:
    """``status.scopes``: the nodes in flight on a pool that changes GPU by GPU, what their
    change takes (the GPUs, or why the whole node), by name, at most ``MAX_PROBLEMS``."""
    out = []
    for r in sorted(reports, key=lambda r: r.name):
        where = r.scope
        if where is None or r.phase not in (*IN_PROGRESS, ReportPhase.BLOCKED):
            continue
        if where.gpus is None and not where.whole:
            continue  # a pool whose changes always take whole nodes: nothing to say
        gpus = gpu_list(where.gpus) if where.gpus is not None else ""
        out.append(NodeScope(node=r.name, phase=r.phase.value, gpus=gpus, whole=where.whole[:512]))
    return tuple(out[:MAX_PROBLEMS])


def bounded(problems: Sequence[NodeProblem]) -> tuple[NodeProblem, ...]:
    ordered = sorted(problems, key=lambda p: (SEVERITY.get(p.reason, 9), p.node))
    return tuple(ordered[:MAX_PROBLEMS])


def verdict(
    reports: Sequence[NodeReport],
    problems: Sequence[NodeProblem],
    gate: tuple[str, str] | None,
) -> Verdict:
    """Stalled beats progressing beats ready; within each, the most specific reason wins.

    ``gate`` is (reason, message) when nodes wait for something other than a
    free slot: the window, an approval, or ``paused``.
    """
    c = counts(reports)
    done = f"{c.updated} of {c.total} nodes updated"
    if problems:
        first = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return Verdict("stalled", first.reason, f"{first.node}: {first.message}{more}; {done}")
    busy = [r for r in reports if r.phase in IN_PROGRESS]
    if busy:
        phases = {r.phase for r in busy}
        if ReportPhase.DRAINING in phases:
            reason = "Draining"
        elif phases & {ReportPhase.APPLYING, ReportPhase.VERIFYING}:
            reason = "WaitingForAgent"
        else:
            reason = "RollingOut"
        busy.sort(key=lambda r: not r.held)  # a node a PDB holds up is named first
        shown = ", ".join(r.shown() for r in busy[:5])
        extra = f" and {len(busy) - 5} more" if len(busy) > 5 else ""
        return Verdict("progressing", reason, f"{done}; {shown}{extra}")
    pending = [r for r in reports if r.phase == ReportPhase.PENDING and not r.no_driver]
    if pending:
        if gate is not None:
            return Verdict("progressing", gate[0], f"{gate[1]}; {done}")
        waiting = next((r.message for r in pending if r.message), "")
        return Verdict("progressing", "RollingOut", f"{done}; {waiting or 'starting nodes'}")
    if any(r.no_driver for r in reports):
        return Verdict("progressing", WAITING_FOR_DRIVER, _no_driver(reports, done))
    return Verdict("ready", "Succeeded", f"all {c.total} nodes match their layout")


def _no_driver(reports: Sequence[NodeReport], done: str) -> str:
    """``WaitingForDriver``: the nodes, and those a layout change waits on (never cordoned)."""
    names = sorted(r.name for r in reports if r.no_driver)
    blocked = sorted(r.name for r in reports if r.no_driver and r.phase == ReportPhase.PENDING)
    text = waiting_text(names)
    if blocked:
        more = f" and {len(blocked) - 5} more" if len(blocked) > 5 else ""
        text += (
            f"; a layout change waits for it on {', '.join(blocked[:5])}{more}, not cordoned "
            "until it runs (the new devices could not be verified)"
        )
    return f"{text}; {done}"
