"""The recount right after a cordon: a node with nothing to evict gets its layout in that pass.

``kubectl drain`` cordons, lists the node's pods and evicts them, one after
the other. A rollout pass used to stop after the cordon: the next pass (woken
by the cordon itself) listed the pods and requested the layout, a whole pass
over every node of the pool later, once per wave. Now the pass that admitted
a node, once its cordon has landed, lists that node's pods fresh and steps it
once more from what it reads: when nothing is left to evict, the layout is
requested there and then (Cordoned → Draining → Applying → Verifying, the
edges ``step`` takes anyway).

Only that case is taken. A node with pods to evict waits for the next pass as
before, so no eviction is ever decided against a budget an earlier stage of
the same pass has already spent. So does a node whose agent may still report
on something else: ``pending`` or ``rebooting`` (mid-flight on its current
labels), or a vGPU node without any verdict yet, whose Device Manager applies
its default config at start-up and then reports it. Such a verdict could land
after the new request and read as the answer to it: a ``failed`` would fail the
new layout. The next pass requests it, a whole pass later, as before. (The MIG
manager and Tessera's vNPU agent act only on a config label: with no verdict
yet there is nothing they could report.) ``nodes`` must be the nodes as the cordon's
write returned them; ``pods`` their pods listed after it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime

from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain.rollout import actions as act
from tessera.domain.rollout import targets
from tessera.domain.rollout.machine import StepContext, step
from tessera.domain.rollout.state import Phase, ReportPhase, TargetSpec
from tessera.domain.rollout.views import DesiredNode, NodeView, PodView


def just_cordoned(owner: str, node: NodeView) -> bool:
    """Whether ``owner`` holds ``node`` in Cordoned: a node whose pods the recount lists."""
    s = node.state
    return s is not None and s.owner == owner and s.phase == Phase.CORDONED and not s.rolled_back


def request_layouts(
    owner: str,
    policy: RolloutSpec,
    desired: Mapping[str, DesiredNode],
    nodes: Sequence[NodeView],
    pods: Sequence[PodView],
    now: datetime,
) -> tuple[act.Action, ...]:
    """The writes that request the layout on each just-cordoned node the recount found empty."""
    by_node: dict[str, list[PodView]] = defaultdict(list)
    for pod in pods:
        by_node[pod.node].append(pod)
    ctx = StepContext(owner, policy, now, by_node, (), {})
    out: list[act.Action] = []
    for node in sorted(nodes, key=lambda n: n.name):
        s, d = node.state, desired.get(node.name)
        if not just_cordoned(owner, node) or s is None or d is None or d.invalid:
            continue
        if _agent_busy(s.target, node):
            continue  # its verdict on something else could land after the request
        outcome = step(ctx, node, s, d)
        if outcome.phase == ReportPhase.VERIFYING and not any(
            isinstance(a, act.Evict | act.DeletePod) for a in outcome.actions
        ):
            out.extend(outcome.emit(s))
    return tuple(out)


def _agent_busy(target: TargetSpec, node: NodeView) -> bool:
    state = targets.agent_state(target, node)
    if state is None:  # never reported: only the vGPU Device Manager acts without a label
        return targets.agent_unheard(target, node)
    return state not in (targets.SUCCESS, targets.FAILED)
