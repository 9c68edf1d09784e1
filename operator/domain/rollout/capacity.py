"""Is there room elsewhere for the pods a drain would evict? Asked before each cordon.

A node is admitted into a rollout only if the pods its drain would evict (the
same ``selection.selected`` the drain uses) fit on the rest of the cluster:
every Ready, schedulable node that no rollout holds (no Tessera taint, no
rollout in flight), other than the nodes this pool already disrupts and the
candidate itself. Room is counted by accelerator resource only (``nvidia.com/*``,
``huawei.com/*``): free = allocatable - the requests of the live (not finished)
pods bound to the node. The pods of nodes already being drained are placed
first: they leave before the candidate's. A pod goes only where its
``nodeSelector`` matches and it tolerates every NoSchedule/NoExecute taint.

This is an estimate, and its errors lean one way each:
- packing is first-fit decreasing, so it may miss a placement that exists and
  hold a node back that could have gone (pessimistic, never a lost pod);
- cpu, memory, affinity, topology spread and pods not yet bound (a replica the
  scheduler has not placed) are not modelled, so it may let a node go whose
  pods then wait Pending (optimistic there; the PDB still guards availability).
A node whose drain evicts nothing, or only pods that request no accelerator,
is never held back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace

from tessera.api import constants

from .state import Phase
from .views import GEOMETRY_PENDING, NodeView, PodView

REASON = "InsufficientCapacity"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"  # a cordon, as kube-controller-manager
SHOWN_PODS = 5


@dataclass(frozen=True)
class Room:
    """The cluster as the check sees it: every node and the accelerators its pods hold."""

    nodes: Sequence[NodeView] = ()
    used: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def room(nodes: Iterable[NodeView], pods: Iterable[PodView]) -> Room:
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        if pod.node and not pod.terminal:
            held = used.setdefault(pod.node, {})
            for resource, n in pod.requests.items():
                held[resource] = held.get(resource, 0) + n
    return Room(tuple(nodes), used)


def accepts(node: NodeView, pod: PodView) -> bool:
    """The pod's nodeSelector matches and it tolerates the node's scheduling taints."""
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    hard = (t for t in node.taints if t.effect in ("NoSchedule", "NoExecute"))
    return all(any(tol.tolerates(t) for tol in pod.tolerations) for t in hard)


def _open(node: NodeView) -> bool:
    s = node.state
    busy = s is not None and s.phase != Phase.UPDATED and not s.rolled_back
    taken = node.unschedulable or not node.ready or node.has_taint(GEOMETRY_PENDING)
    return not (taken or busy or node.state_error)


def _released(node: NodeView) -> NodeView:
    """The node as it is once this pass has lifted Tessera's taint and cordon (and with the
    cordon, the taint the node lifecycle controller mirrors it into)."""
    lifted = (GEOMETRY_PENDING.key, UNSCHEDULABLE_TAINT)
    taints = tuple(t for t in node.taints if t.key not in lifted)
    return replace(node, taints=taints, unschedulable=False)


class Ledger:
    """Free accelerators per open node, consumed as nodes are admitted within one pass."""

    def __init__(self, room: Room, closed: Set[str], reopened: Set[str] = frozenset()) -> None:
        """``closed``: nodes no pod may go to; ``reopened``: nodes this pass releases."""
        self.nodes = {
            n.name: _released(n) if n.name in reopened else n
            for n in room.nodes
            if n.name not in closed and (_open(n) or (n.name in reopened and n.ready))
        }
        self.free: dict[str, dict[str, int]] = {}
        self.placed: dict[str, list[PodView]] = {}  # node → pods this pass sends there
        for name, node in self.nodes.items():
            used = room.used.get(name, {})
            self.free[name] = {
                r: n - used.get(r, 0)
                for r, n in node.allocatable.items()
                if r.startswith(constants.ACCELERATOR_RESOURCE_PREFIXES)
            }

    def fit(self, leaving: str, pods: Sequence[PodView]) -> str:
        """Place ``pods`` as ``leaving`` goes: ``""`` (and the room taken), or why they cannot.

        Pods an earlier admission of this pass sent to ``leaving`` move again with them.
        Nothing is taken when some pod has nowhere to go, so the next candidate is
        judged on the room as it was.
        """
        free = {n: dict(f) for n, f in self.free.items() if n != leaving}
        placed = {n: list(p) for n, p in self.placed.items() if n != leaving}
        stranded = self._place(free, placed, [*pods, *self.placed.get(leaving, ())])
        if stranded:
            return shortfall(stranded, [(self.nodes[n], f) for n, f in free.items()])
        self.free, self.placed = free, placed
        return ""

    def settle(self, leaving: str, pods: Sequence[PodView]) -> None:
        """A node already draining: its pods take what room they find, first."""
        self.free = {n: f for n, f in self.free.items() if n != leaving}
        self._place(self.free, self.placed, pods)

    def _place(
        self,
        free: dict[str, dict[str, int]],
        placed: dict[str, list[PodView]],
        pods: Sequence[PodView],
    ) -> list[PodView]:
        """First-fit decreasing, nodes by name; the pods that found no node."""
        movers = sorted(
            (p for p in pods if p.requests),
            key=lambda p: (-sum(p.requests.values()), p.namespace, p.name),
        )
        stranded = []
        for pod in movers:
            spot = next((n for n in sorted(free) if _fits(self.nodes[n], free[n], pod)), None)
            if spot is None:
                stranded.append(pod)
                continue
            for r, n in pod.requests.items():
                free[spot][r] -= n
            placed.setdefault(spot, []).append(pod)
        return stranded


def _fits(node: NodeView, free: Mapping[str, int], pod: PodView) -> bool:
    return accepts(node, pod) and all(free.get(r, 0) >= n for r, n in pod.requests.items())


def shortfall(
    stranded: Sequence[PodView], left: Sequence[tuple[NodeView, Mapping[str, int]]]
) -> str:
    """``3 pod(s) would have nowhere to run: nvidia.com/mig-1g.10gb short by 3 (ml/a, ...)``.

    A stranded pod is short of each resource no node it may use has enough of;
    when each alone would fit somewhere, of all it asks for. The amount short
    is what the stranded pods ask of that resource: room that would take them all.
    """
    short: dict[str, int] = {}
    for pod in stranded:
        where = [f for node, f in left if accepts(node, pod)]
        lacking = [r for r, n in pod.requests.items() if all(f.get(r, 0) < n for f in where)]
        for r in lacking or list(pod.requests):
            short[r] = short.get(r, 0) + pod.requests[r]
    amounts = ", ".join(f"{r} short by {n}" for r, n in sorted(short.items()))
    refs = [p.ref for p in sorted(stranded, key=lambda p: (p.namespace, p.name))]
    more = f" and {len(refs) - SHOWN_PODS} more" if len(refs) > SHOWN_PODS else ""
    names = ", ".join(refs[:SHOWN_PODS]) + more
    return f"{len(stranded)} pod(s) would have nowhere to run: {amounts} ({names})"
