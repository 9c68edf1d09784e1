"""What the planner asks the controller to do: one small dataclass per API write.

The controller executes a plan's actions in order and stops at the first error,
then re-plans from a fresh observation. Every action is idempotent on its own
(cordoning a cordoned node, setting a label to its value, evicting a pod that
is gone are all no-ops), and the planner orders them so that stopping after any
prefix leaves a state the next plan resumes safely from: the node's state is
written *before* the side effect it enables, and cleared only *after* the
cordon it guarded has been lifted. The controller may send a run of one node's
consecutive patches as a single write (``tessera.controllers.rollout.node_patch``): all
of the run or none of it lands, which is as safe as any prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tessera.api import constants
from tessera.domain.rollout import state as st
from tessera.domain.rollout.views import Taint


@dataclass(frozen=True)
class SetNodeState:
    """Write the rollout state annotations (merge patch; other annotations untouched)."""

    node: str
    state: st.NodeState
    reason: str

    @property
    def annotations(self) -> dict[str, str]:
        return {
            constants.NODE_STATE_ANNOTATION: st.encode(self.state),
            constants.NODE_PHASE_ANNOTATION: self.state.phase.value,
        }


@dataclass(frozen=True)
class ClearNodeState:
    """Remove both rollout annotations: the node is no longer Tessera's business."""

    node: str
    reason: str

    @property
    def annotations(self) -> dict[str, None]:
        return {constants.NODE_STATE_ANNOTATION: None, constants.NODE_PHASE_ANNOTATION: None}


@dataclass(frozen=True)
class Cordon:
    node: str
    reason: str


@dataclass(frozen=True)
class Uncordon:
    """Only ever planned when the persisted original state was schedulable."""

    node: str
    reason: str


@dataclass(frozen=True)
class Evict:
    """policy/v1 Eviction with ``preconditions.uid`` when known and no grace override.

    429 (PDB), 404 (gone) and 409 (replaced) are normal outcomes: the next plan
    sees the pod's ``deletionTimestamp`` or its absence, and the persisted
    attempt count spaces out retries.
    """

    node: str
    namespace: str
    name: str
    uid: str
    reason: str


@dataclass(frozen=True)
class DeletePod:
    """DELETE with the pod's own grace period (never 0) and ``preconditions.uid``: planned
    with ``drain.force``, and to restart a DRA driver's kubelet-plugin pod (``rollout.dra.restart``)."""

    node: str
    namespace: str
    name: str
    uid: str
    reason: str


@dataclass(frozen=True)
class SetNodeLabels:
    """Merge-patch node labels; a ``None`` value removes the label."""

    node: str
    labels: Mapping[str, str | None]
    reason: str


@dataclass(frozen=True)
class AddTaint:
    node: str
    taint: Taint
    reason: str


@dataclass(frozen=True)
class RemoveTaint:
    node: str
    taint: Taint
    reason: str


Action = (
    SetNodeState
    | ClearNodeState
    | Cordon
    | Uncordon
    | Evict
    | DeletePod
    | SetNodeLabels
    | AddTaint
    | RemoveTaint
)


def describe(action: Action) -> str:
    """One line for logs, Events and golden transcripts."""
    match action:
        case SetNodeState(node=n, state=s):
            return f"SetNodeState {n} {s.phase.value} target={s.target.id}: {action.reason}"
        case Evict(namespace=ns, name=name) | DeletePod(namespace=ns, name=name):
            return f"{type(action).__name__} {ns}/{name} on {action.node}: {action.reason}"
        case SetNodeLabels(labels=labels):
            text = ",".join(f"{k}={'-' if v is None else v}" for k, v in sorted(labels.items()))
            return f"SetNodeLabels {action.node} {text}: {action.reason}"
        case AddTaint(taint=t) | RemoveTaint(taint=t):
            return f"{type(action).__name__} {action.node} {t.key}:{t.effect}: {action.reason}"
        case _:
            return f"{type(action).__name__} {action.node}: {action.reason}"
