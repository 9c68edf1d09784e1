"""The result of stepping one node, and how it becomes an ordered list of actions."""

from __future__ import annotations

from dataclasses import dataclass, field

from tessera.domain.rollout import actions as act
from tessera.domain.rollout.draining import Held
from tessera.domain.rollout.state import IllegalTransition, NodeState, ReportPhase


@dataclass(frozen=True)
class RolloutProblem:
    reason: str
    message: str
    since: str = ""


@dataclass(kw_only=True)
class RolloutOutcome:
    """What one node needs this pass.

    ``state`` is persisted *first* (when it differs from what the node
    carries), then ``actions`` run, then ``final`` (the state clear or the
    settled record) is written *last*: stopping after any prefix leaves a node
    the next pass resumes from.
    """

    node: str
    phase: ReportPhase
    """What the pass reports for the node (``state`` is what is written)."""
    why: str
    state: NodeState | None = None
    actions: list[act.Action] = field(default_factory=list)
    final: act.Action | None = None
    problem: RolloutProblem | None = None
    pods_left: int = 0
    blocking_pdbs: set[str] = field(default_factory=set)
    waiting: bool = False
    held: tuple[Held, ...] = ()
    """Pods a PodDisruptionBudget keeps on the node (draining), named in the pool's message."""
    releases: bool = False
    """Tessera lets the node go once these writes land (``releasing.after``): its marks are
    gone, and it leaves the disruption budget unless it stays unavailable all the same."""

    def emit(self, before: NodeState | None) -> list[act.Action]:
        out: list[act.Action] = []
        if self.state is not None and self.state != before:
            out.append(act.SetNodeState(self.node, self.state, self.why))
        out.extend(self.actions)
        if self.final is not None:
            out.append(self.final)
        return out


def stuck(node: str, err: IllegalTransition) -> RolloutOutcome:
    """``node`` cannot go on from its record: nothing is written to it, the pool is told why.

    The other nodes of the pass are decided as usual, so one bad record never
    leaves a node that is mid-drain cordoned and tainted.
    """
    msg = f"rollout state cannot go on ({err}); fix or remove the annotation"
    return RolloutOutcome(
        node=node, phase=ReportPhase.FAILED, why=msg, problem=RolloutProblem("NodeFailed", msg)
    )
