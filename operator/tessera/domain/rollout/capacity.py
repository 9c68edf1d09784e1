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
is never held back. Only resources some node advertises are counted: HAMi's
``nvidia.com/gpumem``/``gpucores`` and Ascend's ``-memory``/``-core`` requests are
HAMi's scheduler's to place, never in any allocatable. A pod already terminating needs
no room (its replacement, once bound, is counted where it runs).

On DRA nodes the room is the devices the node's ResourceSlices publish, counted by
Tessera's DeviceClass of their kind (``dra.naming.geometry_class``: ``mig-1g.10gb.tessera.io``),
and a pod holds what its ResourceClaims were allocated (``domain.rollout.dra.observe``): its
replacement is assumed to ask for the same kind of device. A device no slice lists any
more counts as ``UNPUBLISHED``, which no node offers: such a pod is reported, not assumed
to fit. Claims shared by several pods are counted once per pod (pessimistic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace

from tessera.api import constants
from tessera.domain.base.conditions import INSUFFICIENT_CAPACITY
from tessera.domain.rollout import views
from tessera.domain.rollout.views import GEOMETRY_PENDING, UNSCHEDULABLE_TAINT, NodeView, PodView

REASON = INSUFFICIENT_CAPACITY
SHOWN_PODS = 5
Moves = list[tuple[str, PodView]]  # node → a pod sent there
Taken = dict[str, dict[str, int]]  # node → resource → what the moves take of it


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


def _counted(resource: str) -> bool:
    """Accelerator extended resources, and DRA devices by DeviceClass (``views.counted``)."""
    return resource.startswith(constants.ACCELERATOR_RESOURCE_PREFIXES) or views.counted(resource)


def accepts(node: NodeView, pod: PodView) -> bool:
    """The pod's nodeSelector matches and it tolerates the node's scheduling taints."""
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    hard = (t for t in node.taints if t.effect in ("NoSchedule", "NoExecute"))
    return all(any(tol.tolerates(t) for tol in pod.tolerations) for t in hard)


def _open(node: NodeView) -> bool:
    s = node.state
    busy = s is not None and not s.rolled_back
    taken = node.unschedulable or not node.ready or node.has_taint(GEOMETRY_PENDING)
    return not (taken or busy or node.state_error)


def _released(node: NodeView) -> NodeView:
    """The node as it is once this pass has lifted Tessera's taint and cordon (and with the
    cordon, the taint the node lifecycle controller mirrors it into)."""
    lifted = (GEOMETRY_PENDING.key, UNSCHEDULABLE_TAINT)
    taints = tuple(t for t in node.taints if t.key not in lifted)
    return replace(node, taints=taints, unschedulable=False)


class Ledger:
    """Free accelerators per open node, consumed as nodes are admitted within one pass.

    Each resource keeps the open nodes that still have some of it (``holders``), so a
    pod is matched against the nodes that could take it, not the whole cluster.
    """

    def __init__(self, room: Room, closed: Set[str], reopened: Set[str] = frozenset()) -> None:
        """``closed``: nodes no pod may go to; ``reopened``: nodes this pass releases."""
        self.nodes = {
            n.name: _released(n) if n.name in reopened else n
            for n in room.nodes
            if n.name not in closed and (_open(n) or (n.name in reopened and n.ready))
        }
        # what any node advertises: requests of anything else are not the kubelet's to count
        self.known = {r for n in room.nodes for r in n.allocatable if _counted(r)}
        self.known.add(views.UNPUBLISHED)
        self.free: dict[str, dict[str, int]] = {}
        self.placed: dict[str, list[PodView]] = {}  # node → pods this pass sends there
        # resource → the open nodes with some of it free, in name order (a dict: O(1) removal)
        self.holders: dict[str, dict[str, None]] = {}
        for name in sorted(self.nodes):
            used = room.used.get(name, {})
            self.free[name] = {
                r: n - used.get(r, 0)
                for r, n in self.nodes[name].allocatable.items()
                if _counted(r)
            }
            for r, n in self.free[name].items():
                if n > 0:
                    self.holders.setdefault(r, {})[name] = None

    def fit(self, leaving: str, pods: Sequence[PodView]) -> str:
        """Place ``pods`` as ``leaving`` goes: ``""`` (and the room taken), or why they cannot.

        Pods an earlier start of this pass sent to ``leaving`` move again with them.
        Nothing is taken when some pod has nowhere to go, so the next candidate is
        judged on the room as it was.
        """
        moves, stranded, taken = self._place(leaving, [*pods, *self.placed.get(leaving, ())])
        if stranded:
            return shortfall(stranded, self._left(leaving, stranded, taken))
        self._commit(leaving, moves, taken)
        return ""

    def settle(self, leaving: str, pods: Sequence[PodView]) -> None:
        """A node already draining: its pods take what room they find, first."""
        moves, _, taken = self._place(leaving, pods)
        self._commit(leaving, moves, taken)

    def _place(self, leaving: str, pods: Sequence[PodView]) -> tuple[Moves, list[PodView], Taken]:
        """First-fit decreasing, nodes by name: (moves, pods with no node, room they take)."""
        counted = (
            replace(p, requests={r: k for r, k in p.requests.items() if r in self.known})
            for p in pods
            if p.deletion_timestamp is None
        )
        movers = sorted(
            (p for p in counted if p.requests),
            key=lambda p: (-sum(p.requests.values()), p.namespace, p.name),
        )
        moves: Moves = []
        stranded: list[PodView] = []
        taken: Taken = {}
        for pod in movers:
            scarcest = min(pod.requests, key=lambda r: len(self.holders.get(r, ())))
            spot = next(
                (
                    n
                    for n in self.holders.get(scarcest, ())
                    if n != leaving and self._fits(n, taken.get(n, {}), pod)
                ),
                None,
            )
            if spot is None:
                stranded.append(pod)
                continue
            took = taken.setdefault(spot, {})
            for r, k in pod.requests.items():
                took[r] = took.get(r, 0) + k
            moves.append((spot, pod))
        return moves, stranded, taken

    def _fits(self, name: str, taken: Mapping[str, int], pod: PodView) -> bool:
        free = self.free[name]
        enough = all(free.get(r, 0) - taken.get(r, 0) >= k for r, k in pod.requests.items())
        return enough and accepts(self.nodes[name], pod)

    def _commit(self, leaving: str, moves: Moves, taken: Taken) -> None:
        self.free.pop(leaving, None)
        self.placed.pop(leaving, None)
        for name, took in taken.items():
            for r, k in took.items():
                self.free[name][r] -= k
        for name, pod in moves:
            self.placed.setdefault(name, []).append(pod)
        for names in self.holders.values():
            names.pop(leaving, None)
        for name, took in taken.items():
            for r in took:
                if self.free[name].get(r, 0) <= 0:
                    self.holders.get(r, {}).pop(name, None)

    def _left(
        self, leaving: str, stranded: Sequence[PodView], taken: Taken
    ) -> list[tuple[NodeView, dict[str, int]]]:
        """The nodes that have some of what the stranded pods ask for, with what is left."""
        names = {n for p in stranded for r in p.requests for n in self.holders.get(r, ())}
        out = []
        for n in sorted(names - {leaving}):
            took = taken.get(n, {})
            out.append((self.nodes[n], {r: f - took.get(r, 0) for r, f in self.free[n].items()}))
        return out


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
