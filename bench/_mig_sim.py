"""A simulated pool of H100 80GB MIG GPUs and a kube-scheduler stand-in, for bench.autopilot.

Layouts are profile multisets checked by Tessera's placement solver (a layout is valid iff
the catalog's ``-lgipp`` placements can hold it). Node choice models kube-scheduler's
default score, NodeResourcesFit's ``LeastAllocated``, taken over the pod's MIG resource
(the share of the node's instances of that profile still free; highest wins, ties to the
first node), and the device plugin then hands out the lowest GPU index with a free
instance. A pod of N whole GPUs needs N free 7g.80gb instances on one node. Pending pods
are retried in arrival order after every change, as the scheduler's queue does.

Every instance has its place on the GPU's slot grid (``slots``), and a pod holds one
particular instance. A layout change keeps the instances pods hold where they are, as the
hardware does: a GPU that holds pods can only be repartitioned in its free part
(``keeps``); a change that cannot keep them moves them, and every pod moved is evicted
and pends again (``Pool.evictions``), whichever policy asked for it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from bench._trace import Pod
from tessera.domain.autopilot import demand
from tessera.domain.geometry import catalog, placement

MODEL = catalog.resolve("H100-80GB")
DAY = 86_400.0


@dataclass(slots=True)
class Gpu:
    node: int
    index: int
    layout: dict[str, int]
    slots: list[placement.Instance] = field(default_factory=list)  # where each instance sits
    held: dict[int, str] = field(default_factory=dict)  # an instance's start -> its pod
    used: dict[str, int] = field(default_factory=dict)
    changes: list[float] = field(default_factory=list)  # when its layout changed

    def __post_init__(self) -> None:
        if not self.slots:
            self.slots = list(_where(self.layout))

    def free(self, profile: str) -> int:
        return self.layout.get(profile, 0) - self.used.get(profile, 0)

    def take(self, profile: str, pod: str) -> None:
        """The pod takes the free instance of ``profile`` at the lowest slot."""
        start = min(
            i.start for i in self.slots if i.profile == profile and i.start not in self.held
        )
        self.held[start] = pod
        self.used[profile] = self.used.get(profile, 0) + 1

    def give(self, profile: str, pod: str) -> None:
        start = next(s for s, p in self.held.items() if p == pod and self._at(s) == profile)
        del self.held[start]
        self.used[profile] -= 1
        if not self.used[profile]:
            del self.used[profile]

    def pinned(self) -> list[placement.Instance]:
        """The instances pods hold: a layout change must leave them where they are."""
        return [i for i in self.slots if i.start in self.held]

    def _at(self, start: int) -> str:
        return next(i.profile for i in self.slots if i.start == start)

    def changed_on(self, day: int) -> int:
        return sum(1 for t in self.changes if int(t // DAY) == day)


@dataclass(slots=True)
class Waiting:
    pod: Pod
    since: float


class Pool:
    """Nodes of GPUs, the pods on them, the pending queue; no policy of its own."""

    def __init__(self, nodes: int, per_node: int, layouts: Iterable[dict[str, int]]):
        it = iter(layouts)
        self.nodes = [[Gpu(n, i, dict(next(it))) for i in range(per_node)] for n in range(nodes)]
        self.gpus = [g for node in self.nodes for g in node]
        self.capacity = float(len(self.gpus))
        self.where: dict[str, list[Gpu]] = {}
        self.pods: dict[str, Pod] = {}
        self.pending: deque[Waiting] = deque()
        self.sevenths = 0  # sevenths of a GPU held by pods, counted exactly
        self.evictions = 0

    @property
    def allocated(self) -> float:
        """GPUs' worth of instances held by pods."""
        return self.sevenths / 7

    def place(self, pod: Pod) -> bool:
        best: tuple[float, list[Gpu]] | None = None
        for node in self.nodes:
            hosts = [g for g in node if g.free(pod.profile) > 0]
            free = sum(g.free(pod.profile) for g in hosts)
            if free < pod.count:
                continue
            total = sum(g.layout.get(pod.profile, 0) for g in node)
            score = free / total
            if best is None or score > best[0]:
                best = (score, hosts)
        if best is None:
            return False
        taken: list[Gpu] = []
        need = pod.count
        for g in best[1]:
            while need and g.free(pod.profile) > 0:
                g.take(pod.profile, pod.name)
                taken.append(g)
                need -= 1
        self.where[pod.name] = taken
        self.pods[pod.name] = pod
        self.sevenths += pod.sevenths
        return True

    def release(self, pod: Pod) -> bool:
        taken = self.where.pop(pod.name, None)
        if taken is None:
            return False
        self.pods.pop(pod.name, None)
        for g in taken:
            g.give(pod.profile, pod.name)
        self.sevenths -= pod.sevenths
        return True

    def reconfigure(self, gpu: Gpu, layout: dict[str, int], now: float) -> None:
        """The new layout, keeping held instances in place; pods it cannot keep are evicted
        (counted, and pending again from ``now``)."""
        if not placement.fits(MODEL, placement.counts_key(layout)):
            raise AssertionError(f"invalid layout {layout}")
        slots = keeps(layout, gpu.pinned())
        if slots is None:
            slots = list(_where(layout))
            stay = {(i.profile, i.start) for i in slots}
            moved = {gpu.held[i.start] for i in gpu.pinned() if (i.profile, i.start) not in stay}
            for name in sorted(moved):
                pod = self.pods[name]
                self.release(pod)
                self.evictions += 1
                self.pending.append(Waiting(pod, now))
            held = {i.start: gpu.held[i.start] for i in gpu.pinned()}
            gpu.held.clear()
            gpu.used.clear()
            gpu.slots = slots
            for start, name in held.items():
                gpu.held[start] = name
                profile = next(i.profile for i in slots if i.start == start)
                gpu.used[profile] = gpu.used.get(profile, 0) + 1
        else:
            gpu.slots = slots
        gpu.layout = dict(layout)
        gpu.changes.append(now)

    def schedule(self, now: float, on_placed: Callable[[Waiting, float], None]) -> None:
        """Retry every pending pod in order; a profile that found no room is skipped after."""
        stuck: set[tuple[str, int]] = set()
        keep: deque[Waiting] = deque()
        for w in self.pending:
            key = (w.pod.profile, w.pod.count)
            if key not in stuck and self.place(w.pod):
                on_placed(w, now)
            else:
                stuck.add(key)
                keep.append(w)
        self.pending = keep

    def views(self, now: float) -> list[demand.Gpu]:
        today = int(now // DAY)
        return [
            demand.Gpu(
                f"node-{g.node}",
                g.index,
                MODEL.id,
                demand.counts(g.layout),
                demand.counts(g.used),
                g.changed_on(today),
            )
            for g in self.gpus
        ]

    def wants(self, now: float) -> list[demand.Pending]:
        return [
            demand.Pending(
                w.pod.profile, w.pod.count, timedelta(seconds=now - w.since), w.pod.count
            )
            for w in self.pending
        ]

    def gpu(self, name: str, index: int) -> Gpu:
        return self.nodes[int(name.removeprefix("node-"))][index]


def _where(layout: dict[str, int]) -> tuple[placement.Instance, ...]:
    return placement.place(MODEL, layout).instances


def keeps(
    layout: dict[str, int], pinned: list[placement.Instance]
) -> list[placement.Instance] | None:
    """``layout``'s instances with ``pinned`` left at their slots, the rest placed around them
    (backtracking over each profile's allowed starts), or None when they cannot stay."""
    rest = dict(layout)
    grid = 0
    for i in pinned:
        rest[i.profile] = rest.get(i.profile, 0) - 1
        if rest[i.profile] < 0:
            return None
        profile = MODEL.by_name[i.profile]
        grid |= profile.masks[profile.starts.index(i.start)]
    if not pinned:
        return list(_where(layout))
    todo = placement.expand(MODEL, placement.counts_key(rest))
    out: list[placement.Instance] = list(pinned)

    def go(k: int, grid: int, low: int) -> bool:
        if k == len(todo):
            return True
        profile = todo[k]
        for j in range(low, len(profile.masks)):
            if grid & profile.masks[j]:
                continue
            out.append(placement.Instance(profile.name, profile.starts[j], profile.size))
            same = k + 1 < len(todo) and todo[k + 1] is profile
            if go(k + 1, grid | profile.masks[j], j + 1 if same else 0):
                return True
            out.pop()
        return False

    return out if go(0, grid, 0) else None
