"""A simulated pool of H100 80GB MIG GPUs and a kube-scheduler stand-in, for bench.autopilot.

Layouts are profile multisets checked by Tessera's placement solver (a layout is valid iff
the catalog's ``-lgipp`` placements can hold it). Node choice models kube-scheduler's
default score, NodeResourcesFit's ``LeastAllocated``, taken over the pod's MIG resource
(the share of the node's instances of that profile still free; highest wins, ties to the
first node), and the device plugin then hands out the lowest GPU index with a free
instance. A pod of N whole GPUs needs N free 7g.80gb instances on one node. Pending pods
are retried in arrival order after every change, as the scheduler's queue does.
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
    used: dict[str, int] = field(default_factory=dict)
    changes: list[float] = field(default_factory=list)  # when its layout changed

    def free(self, profile: str) -> int:
        return self.layout.get(profile, 0) - self.used.get(profile, 0)

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
        self.pending: deque[Waiting] = deque()
        self.allocated = 0.0  # GPUs' worth of instances held by pods
        self.evictions = 0

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
                g.used[pod.profile] = g.used.get(pod.profile, 0) + 1
                taken.append(g)
                need -= 1
        self.where[pod.name] = taken
        self.allocated += pod.gpus
        return True

    def release(self, pod: Pod) -> bool:
        taken = self.where.pop(pod.name, None)
        if taken is None:
            return False
        for g in taken:
            g.used[pod.profile] -= 1
            if not g.used[pod.profile]:
                del g.used[pod.profile]
        self.allocated -= pod.gpus
        return True

    def reconfigure(self, gpu: Gpu, layout: dict[str, int], now: float) -> None:
        if not placement.fits(MODEL, placement.counts_key(layout)):
            raise AssertionError(f"invalid layout {layout}")
        self.evictions += sum(max(0, n - layout.get(p, 0)) for p, n in gpu.used.items())
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
            demand.Pending(w.pod.profile, w.pod.count, timedelta(seconds=now - w.since))
            for w in self.pending
        ]

    def gpu(self, name: str, index: int) -> Gpu:
        return self.nodes[int(name.removeprefix("node-"))][index]
