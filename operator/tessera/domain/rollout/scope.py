"""How much of a node a change disrupts: the GPUs it repartitions and the pods on them, or all.

A MIG change is made GPU by GPU: the MIG manager repartitions the GPUs whose layout differs
and leaves the others as they are. So only the pods holding a changed GPU have to leave;
the others keep running, untouched, on the node held for the change (cordoned and tainted:
nothing new lands on it). Who holds which GPU comes from the GPU node agent's record
(``holders``) or, on a DRA pool, from its ResourceClaims (``dra.claims``), never from a
guess. ``decide`` picks the scope when a node starts and the
record keeps it (``NodeState.gpus``); ``leaving`` says, on every pass, which pods must go.

The whole node is drained, as before, when the change cannot be narrowed, and the reason is
said on the node's report, in the start's Events and on its record (``NodeState.whole``):

- the pool's kind changes whole nodes (vGPU, vNPU, a sharing switch): no reason, as
  nothing narrower was ever possible;
- the layout the node runs now is not known (no config, its agent not at ``success``);
- every GPU changes anyway;
- no GPU node agent runs on the node, its record is missing, unreadable or overflowed, or
  it is stale: a pod that requests a device is not in it, or was created at or after it
  was read (a pod recreated under the same name holds other GPUs);
- on a DRA pool, its claims cannot say (``dra.claims.held``: a device its slices do not
  list, a pod its claim is not reserved for yet).

A pod the record does not place (a ``drain.podSelector`` pod that reaches the GPU without a
request, a pod that arrived after the start) always leaves: unknown means it might hold one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tessera.api import constants as c
from tessera.api.v1alpha1.common import DrainSpec
from tessera.domain.geometry.layouts import counts_text, index_ranges
from tessera.domain.rollout import selection
from tessera.domain.rollout.holders import Holders
from tessera.domain.rollout.state import NodeState, ts
from tessera.domain.rollout.views import DesiredNode, Layout, NodeView, PodView


@dataclass(frozen=True)
class Scope:
    gpus: tuple[int, ...] | None
    """The GPUs the change repartitions; None: the whole node."""
    whole: str = ""
    """Why the whole node goes although its pool changes GPU by GPU; "" otherwise."""

    def text(self, leave: int, stay: int, moves: str = "") -> str:
        """``GPUs 0-3 change; 6 pods move, 10 stay``, ``whole node: <why>; 6 pods move``, or
        ``""`` for a pool whose changes always take the whole node. ``moves``, the text of
        ``moves()``, says after the GPUs what each runs now and next (``tessera plan``):
        ``GPUs 0-3 change (0-3: whole GPU -> 2x3g.40gb); ...``."""
        if self.gpus is not None:
            which = f"GPU {self.gpus[0]}" if len(self.gpus) == 1 else f"GPUs {gpu_list(self.gpus)}"
            what = f" ({moves})" if moves else ""
            return f"{which} change{what}; {_pods(leave)} move, {stay} stay"
        return f"whole node: {self.whole}; {_pods(leave)} move" if self.whole else ""


def _pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


def gpu_list(gpus: Sequence[int]) -> str:
    return index_ranges(gpus).replace(", ", ",")


def changed(now: Layout, target: Layout) -> tuple[int, ...]:
    """The GPU indices whose layout differs."""
    return tuple(i for i, (a, b) in enumerate(zip(now, target, strict=True)) if a != b)


def transitions(
    now: Layout | None, target: Layout | None, gpus: Sequence[int]
) -> tuple[tuple[int, str, str], ...]:
    """``(index, what it runs now, what it runs next)`` of each GPU in ``gpus``, for people
    (``whole GPU``, ``7x1g.10gb``); ``()`` where either layout is not known."""
    if now is None or target is None or len(now) != len(target):
        return ()
    return tuple(
        (i, counts_text(now[i]), counts_text(target[i])) for i in sorted(gpus) if i < len(now)
    )


def moves(now: Layout | None, target: Layout | None, gpus: Sequence[int]) -> str:
    """``0-3: whole GPU -> 2x3g.40gb, 5: 7g.80gb -> 7x1g.10gb``: ``transitions`` with the GPUs
    that change alike grouped, so a line stays short on a 16-GPU node."""
    grouped: dict[tuple[str, str], list[int]] = {}
    for i, before, after in transitions(now, target, gpus):
        grouped.setdefault((before, after), []).append(i)
    return ", ".join(
        f"{gpu_list(ix)}: {before} -> {after}"
        for (before, after), ix in sorted(grouped.items(), key=lambda kv: kv[1][0])
    )


def agent_running(pods: Sequence[PodView]) -> bool:
    """A GPU node agent's pod runs on the node (its DaemonSet's, config/agent)."""
    return any(
        p.labels.get(c.COMPONENT_LABEL) == c.GPU_AGENT_COMPONENT
        and p.phase == "Running"
        and p.deletion_timestamp is None
        for p in pods
    )


def stale(holders: Holders, pods: Sequence[PodView]) -> str:
    """Why the record does not describe these pods, or ``""``."""
    if holders.overflow:
        return "the GPU node agent's record overflowed"
    for pod in pods:
        if not pod.requests_accelerator:
            continue
        if pod.created is not None and pod.created >= holders.read:
            return (
                f"pod {pod.ref} was created after the GPU holders were read at {ts(holders.read)}"
            )
        if pod.ref in holders.unmapped:
            return f"pod {pod.ref} holds a device nvidia-smi does not name"
        if holders.gpus_of(pod.ref) is None:
            return f"pod {pod.ref} is not in the GPU holders read at {ts(holders.read)}"
    return ""


def decide(node: NodeView, d: DesiredNode, pods: Sequence[PodView], drain: DrainSpec) -> Scope:
    """The scope of changing ``node`` to ``d`` now; ``pods``: every pod on the node."""
    if d.layout is None:
        return Scope(None)
    if node.layout is None or len(node.layout) != len(d.layout):
        return Scope(None, f"the layout {node.name} runs now is not known")
    gpus = changed(node.layout, d.layout)
    if len(gpus) == len(d.layout):
        return Scope(None, "every GPU changes")
    if node.dra is not None:  # a DRA pool: the claims say who holds what (``dra.claims``)
        if node.holders is None:
            return Scope(None, node.holders_error or f"the claims on {node.name} were not read")
    elif not agent_running(pods):
        return Scope(None, f"no GPU node agent runs on {node.name}")
    if node.holders is None:
        why = node.holders_error or "no GPU holders record"
        return Scope(None, f"the GPU node agent's record is unusable: {why}")
    why = stale(node.holders, selection.selected(pods, drain))
    return Scope(None, why) if why else Scope(gpus)


def of(s: NodeState) -> Scope:
    return Scope(s.gpus, s.whole)


def planned(
    node: NodeView, d: DesiredNode, pods: Sequence[PodView], drain: DrainSpec, owner: str
) -> Scope:
    """The scope ``node``'s change has (the record of ``owner``'s rollout in flight on it)
    or would have, were it started now (``decide``): what ``tessera plan`` shows."""
    s = node.state
    if s is not None and s.owner == owner and not s.rolled_back:
        return of(s)
    return decide(node, d, pods, drain)


def leaving(
    node: NodeView, scope: Scope, pods: Sequence[PodView], drain: DrainSpec
) -> list[PodView]:
    """The pods on ``node`` that must be gone before its change, sorted by name."""
    chosen = selection.selected(pods, drain)
    if scope.gpus is None:
        return chosen
    return [p for p in chosen if not stays(node.holders, scope.gpus, p)]


def stays(holders: Holders | None, gpus: Sequence[int], pod: PodView) -> bool:
    """The record places ``pod`` on GPUs that do not change, and it was read after the pod
    came: anything less and the pod leaves."""
    if holders is None or not pod.requests_accelerator:
        return False
    if pod.created is None or pod.created >= holders.read:
        return False
    held = holders.gpus_of(pod.ref)
    return held is not None and bool(held) and not set(held) & set(gpus)
