"""Geometry that follows demand (issue 29): static layouts, greedy, and Tessera's autopilot on
the Alibaba GPU trace mapped onto H100 80GB MIG (``bench._trace``), in one run.

- **fill** (the method of Weng et al., USENIX ATC'23): pods arrive in trace order (from the
  start again when it runs out), none leave, until arrived demand is 130 % of 100 nodes x 8
  GPUs; the share of capacity allocated when arrivals reach 100 % and at the end.
- **churn**: the trace with its own creation and deletion times on 8 nodes x 8 GPUs; demand
  placed (GPU-time weighted: a pod that pends runs for less of its life), pending time p50 /
  p95 (a pod never placed pends until its deletion), reconfigurations per GPU per day (the
  trace's 149 days), evictions.

Policies: every static homogeneous layout; the best static mixed layout in hindsight (the
oracle: per column the best of every static layout tried — the homogeneous ones, the trace's
demand mix packed by ``geometry.packing`` and scaled to the pool for three mixes: all
arrivals, time-weighted and peak concurrency, and each mix's fractional part packed beside
whole GPUs at every share of ``WHOLE_SHARES``); greedy reconfigure-on-pending as nos does (a
pending pod at once repartitions the free part of the first GPU that can hold it — the
instances in use stay at their slots — to the allowed layout that provides most of what
pends, no limit); Tessera's autopilot (``tessera.domain.autopilot.choice.decide``: idle GPUs
only, pend threshold 5 min in churn, at most 1 reconfiguration per GPU per day). Greedy and
the autopilot start from whole GPUs (7g.80gb). Every policy obeys the same physics
(``bench._mig_sim``): a pod holds one instance at its slots, a change keeps held instances in
place or evicts (and counts) the pods it moves. A pure simulation: no cluster. Placement and node choice: ``bench._mig_sim``.
"""

from __future__ import annotations

import heapq
import itertools
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cache

from bench._mig_sim import DAY, MODEL, Gpu, Pool, Waiting, keeps
from bench._trace import PROFILES, WHOLE, Pod, load
from tessera.domain.autopilot import choice, demand
from tessera.domain.autopilot.bounds import Bounds
from tessera.domain.geometry import enumeration, packing, placement

MENU = tuple(name for name, _ in PROFILES)
FILL_NODES, CHURN_NODES, PER_NODE = 100, 8, 8
FILL_TO = 1.30
THRESHOLD = timedelta(minutes=5)
WHOLE_SHARES = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)  # the oracle's whole-GPU shares
Layout = dict[str, int]
Policy = Callable[[Pool, float], None]  # acts on the pool's pending pods at time t


def bounds(threshold: timedelta) -> Bounds:
    return Bounds(profiles={MODEL.id: MENU}, pend_threshold=threshold, per_gpu_per_day=1)


def autopilot(threshold: timedelta) -> Policy:
    rules = bounds(threshold)

    def act(pool: Pool, now: float) -> None:
        if not any(now - w.since >= threshold.total_seconds() for w in pool.pending):
            return
        decision = choice.decide(pool.views(now), pool.wants(now), rules)
        for change in decision.changes:
            pool.reconfigure(pool.gpu(change.gpu.node, change.gpu.index), dict(change.layout), now)

    return act


@cache
def _maximal() -> tuple[placement.Counts, ...]:
    return enumeration.layouts(MODEL, profiles=MENU, maximal=True)


def greedy(pool: Pool, now: float) -> None:
    """nos: for each pending pod, repartition the first GPU whose free part can hold it.

    As nos's planner does, a GPU's candidate layouts are the allowed (maximal) ones that keep
    every instance its pods use, and the one that provides most of what the pending pods ask
    for wins; as on the hardware, the instances in use stay at their slots, so only layouts
    that place around them count (``_mig_sim.keeps``): nos would try the others and fail to
    create them. Whole-GPU pods get idle GPUs of one node made whole."""
    asked: Layout = {}
    for w in pool.pending:
        if w.pod.profile != WHOLE:
            asked[w.pod.profile] = asked.get(w.pod.profile, 0) + w.pod.count
    for w in list(pool.pending):
        pod = w.pod
        if pod.profile == WHOLE:
            for node in pool.nodes:
                spare = [g for g in node if g.free(WHOLE) > 0 or not g.used]
                if len(spare) >= pod.count:
                    for g in spare[: pod.count]:
                        if g.free(WHOLE) <= 0:
                            pool.reconfigure(g, {WHOLE: 1}, now)
                    break
            continue
        if any(g.free(pod.profile) > 0 for g in pool.gpus):
            continue
        for g in pool.gpus:
            layout = _repartition(g.layout, g.used, _pins(g), pod.profile, asked)
            if layout is not None:
                pool.reconfigure(g, dict(layout), now)
                break


def _pins(g: Gpu) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((i.profile, i.start) for i in g.pinned()))


def _repartition(
    layout: Layout, used: Layout, pins: tuple[tuple[str, int], ...], profile: str, asked: Layout
) -> placement.Counts | None:
    """nos's choice for one GPU: of the layouts that keep the pinned instances in place and
    add ``profile``, the one providing most of ``asked`` beyond what is free now."""
    best: tuple[int, placement.Counts] | None = None
    for c in _keeping(pins):
        have = dict(c)
        if have.get(profile, 0) - used.get(profile, 0) <= 0:
            continue
        gain = sum(
            min(have.get(p, 0) - used.get(p, 0), n)
            for p, n in asked.items()
            if layout.get(p, 0) - used.get(p, 0) < n
        )
        if best is None or gain > best[0]:
            best = (gain, c)
    return None if best is None else best[1]


@cache
def _keeping(pins: tuple[tuple[str, int], ...]) -> tuple[placement.Counts, ...]:
    """The maximal allowed layouts that can leave the pinned instances where they are."""
    pinned = [placement.Instance(p, s, MODEL.by_name[p].size) for p, s in pins]
    return tuple(c for c in _maximal() if keeps(dict(c), pinned) is not None)


def static(_pool: Pool, _now: float) -> None:
    return None


@dataclass(frozen=True)
class Fill:
    at_100: float
    at_end: float
    reconfigs: int
    evictions: int


@dataclass(frozen=True)
class Churn:
    placed: float
    p50: float
    p95: float
    per_gpu_day: float
    max_gpu_day: int
    evictions: int


def fill(pods: Sequence[Pod], layouts: Sequence[Layout], policy: Policy) -> Fill:
    pool = Pool(FILL_NODES, PER_NODE, layouts)
    arrived, at_100, i = 0.0, None, 0
    while arrived < FILL_TO * pool.capacity:
        pod = pods[i % len(pods)]
        pod = Pod(f"{pod.name}#{i}", pod.profile, pod.count, 0.0, 0.0)
        i += 1
        arrived += pod.gpus
        if not pool.place(pod):
            pool.pending.append(Waiting(pod, 0.0))
            policy(pool, 0.0)
            pool.schedule(0.0, lambda w, t: None)
        if at_100 is None and arrived >= pool.capacity:
            at_100 = pool.allocated / pool.capacity
    changes = sum(len(g.changes) for g in pool.gpus)
    return Fill(at_100 or 0.0, pool.allocated / pool.capacity, changes, pool.evictions)


def churn(
    pods: Sequence[Pod], layouts: Sequence[Layout], policy: Policy, threshold: float
) -> Churn:
    pool = Pool(CHURN_NODES, PER_NODE, layouts)
    events: list[tuple[float, int, int, Pod]] = []  # time, kind (0 leave, 1 wake, 2 arrive)
    seq = itertools.count()
    for pod in pods:
        heapq.heappush(events, (pod.created, 2, next(seq), pod))
    started: dict[str, float] = {}
    pended: list[float] = []

    def placed(w: Waiting, now: float) -> None:
        started[w.pod.name] = now
        pended.append(now - w.since)
        heapq.heappush(events, (w.pod.deleted, 0, next(seq), w.pod))

    end = max(p.deleted for p in pods)
    while events:
        now, kind, _, pod = heapq.heappop(events)
        if kind == 0:
            pool.release(pod)
        elif kind == 2:
            pool.pending.append(Waiting(pod, now))
            heapq.heappush(events, (now + threshold, 1, next(seq), pod))
        # pods the trace deletes while they pend leave the queue, never placed
        gone = [w for w in pool.pending if w.pod.deleted <= now]
        for w in gone:
            pended.append(w.pod.deleted - w.since)
        if gone:
            pool.pending = type(pool.pending)(w for w in pool.pending if w.pod.deleted > now)
        pool.schedule(now, placed)
        if pool.pending:
            policy(pool, now)
            pool.schedule(now, placed)
    for w in pool.pending:
        pended.append(end - w.since)
    wanted = sum(p.gpus * (p.deleted - p.created) for p in pods)
    served = sum(p.gpus * max(0.0, p.deleted - started[p.name]) for p in pods if p.name in started)
    days = end / DAY
    per_day = [0] * (int(days) + 1)
    most = 0
    for g in pool.gpus:
        counts: dict[int, int] = {}
        for t in g.changes:
            counts[int(t // DAY)] = counts.get(int(t // DAY), 0) + 1
        most = max([most, *counts.values()])
        per_day[0] += len(g.changes)
    q = statistics.quantiles(pended, n=20)
    return Churn(
        served / wanted,
        statistics.median(pended),
        q[18],
        per_day[0] / len(pool.gpus) / days,
        most,
        pool.evictions,
    )


def homogeneous() -> list[Layout]:
    out = []
    for name in MENU:
        n = MODEL.by_name[name].max_instances
        while not placement.fits(MODEL, ((name, n),)):
            n -= 1
        out.append({name: n})
    return out


def mixed(mix: dict[str, float], gpus: int, whole: int | None = None) -> list[Layout]:
    """The demand mix packed into layouts (geometry.packing), scaled to ``gpus`` GPUs; layouts
    with whole GPUs first, so nodes hold them together for multi-GPU pods. ``whole``: that
    many whole GPUs, and the mix's fractional part packed into the rest."""
    if whole is not None:
        part = {p: n for p, n in mix.items() if p != WHOLE}
        if not part or whole >= gpus:
            return [{WHOLE: 1}] * gpus
        return [{WHOLE: 1}] * whole + mixed(part, gpus - whole)
    scale = 2_000 / max(1.0, sum(mix.values()))
    want = {p: round(n * scale) for p, n in mix.items() if round(n * scale) > 0}
    packed = packing.pack(MODEL, want)
    kinds: dict[placement.Counts, int] = {}
    for p in packed.gpus:
        key = placement.counts_key(_instances(p))
        kinds[key] = kinds.get(key, 0) + 1
    total = sum(kinds.values())
    shares = sorted(kinds.items(), key=lambda kv: (-dict(kv[0]).get(WHOLE, 0), kv[0]))
    counts = [int(n * gpus / total) for _, n in shares]
    rest = sorted(range(len(shares)), key=lambda i: -(shares[i][1] * gpus / total - counts[i]))
    for i in rest[: gpus - sum(counts)]:
        counts[i] += 1
    return [dict(k) for (k, _), n in zip(shares, counts, strict=True) for _ in range(n)]


def candidates(mixes: Sequence[dict[str, float]], gpus: int) -> list[list[Layout]]:
    """The oracle's static mixed layouts for a pool of ``gpus``: each mix packed as it is, and
    each mix's fractional part packed beside every whole-GPU share in ``WHOLE_SHARES``."""
    out = [mixed(m, gpus) for m in mixes]
    for m in mixes:
        for share in WHOLE_SHARES:
            out.append(mixed(m, gpus, round(share * gpus)))
    return out


def _instances(p: placement.Placement) -> Layout:
    out: Layout = {}
    for i in p.instances:
        out[i.profile] = out.get(i.profile, 0) + 1
    return out


def mixes(pods: Sequence[Pod], fill_pods: Sequence[Pod]) -> list[dict[str, float]]:
    """Three views of the trace's demand mix, per profile in instances."""
    arrivals: dict[str, float] = {}
    for p in fill_pods:
        arrivals[p.profile] = arrivals.get(p.profile, 0) + p.count
    weighted: dict[str, float] = {}
    for p in pods:
        weighted[p.profile] = weighted.get(p.profile, 0) + p.count * (p.deleted - p.created)
    edges = sorted(
        [(p.created, 1, p) for p in pods] + [(p.deleted, -1, p) for p in pods],
        key=lambda e: (e[0], e[1]),
    )
    now: dict[str, float] = {}
    peak: dict[str, float] = {}
    level = best = 0.0
    for _, sign, p in edges:
        now[p.profile] = now.get(p.profile, 0) + sign * p.count
        level += sign * p.gpus
        if level > best:
            best, peak = level, dict(now)
    return [arrivals, weighted, peak]


def fill_arrivals(pods: Sequence[Pod]) -> list[Pod]:
    out, arrived, i = [], 0.0, 0
    while arrived < FILL_TO * FILL_NODES * PER_NODE:
        out.append(pods[i % len(pods)])
        arrived += pods[i % len(pods)].gpus
        i += 1
    return out


def decision_time() -> float:
    """One decision for 1,000 nodes x 8 GPUs, 20 % idle, thousands of pods pending."""
    rng = random.Random(29)
    shapes = [{"1g.10gb": 7}, {"3g.40gb": 2}, {"7g.80gb": 1}, {"2g.20gb": 3}, {"4g.40gb": 1}]
    gpus = []
    for n in range(1_000):
        for i in range(8):
            lay = demand.counts(rng.choice(shapes))
            used = () if rng.random() < 0.2 else ((lay[0][0], 1),)
            gpus.append(demand.Gpu(f"node-{n}", i, MODEL.id, lay, used))
    wants = [
        demand.Pending(p, n, timedelta(minutes=9))
        for p, n in (("1g.10gb", 9_000), ("2g.20gb", 3_000), ("3g.40gb", 900), ("7g.80gb", 300))
    ]
    placement.clear_cache()
    started = time.perf_counter()
    choice.decide(gpus, wants, bounds(THRESHOLD))
    return time.perf_counter() - started


def main() -> None:
    started = time.perf_counter()
    pods = load()
    arrivals = fill_arrivals(pods)
    whole = [{WHOLE: 1}] * (FILL_NODES * PER_NODE)
    rows: list[tuple[str, Fill, Churn]] = []
    for layout in homogeneous():
        name = "static " + "+".join(f"{p}x{n}" for p, n in layout.items())
        rows.append(
            (
                name,
                fill(pods, [layout] * FILL_NODES * PER_NODE, static),
                churn(pods, [layout] * CHURN_NODES * PER_NODE, static, THRESHOLD.total_seconds()),
            )
        )
    seen = mixes(pods, arrivals)
    fills = [fill(pods, c, static) for c in candidates(seen, FILL_NODES * PER_NODE)]
    churns = [
        churn(pods, c, static, THRESHOLD.total_seconds())
        for c in candidates(seen, CHURN_NODES * PER_NODE)
    ]
    # every homogeneous layout is a mixed one too, and each column takes its own best layout:
    # the oracle is at least every static layout tried, in every column
    fills += [r[1] for r in rows]
    churns += [r[2] for r in rows]
    oracle = (
        "static mixed (oracle)",
        Fill(max(f.at_100 for f in fills), max(f.at_end for f in fills), 0, 0),
        Churn(
            max(c.placed for c in churns),
            min(c.p50 for c in churns),
            min(c.p95 for c in churns),
            0.0,
            0,
            0,
        ),
    )
    best_homo = max(rows, key=lambda r: r[1].at_end + r[2].placed)
    rows.append(oracle)
    g = (
        "greedy (nos-like)",
        fill(pods, whole, greedy),
        churn(pods, whole[: CHURN_NODES * PER_NODE], greedy, THRESHOLD.total_seconds()),
    )
    rows.append(g)
    a = (
        "tessera autopilot",
        fill(pods, whole, autopilot(timedelta(0))),
        churn(
            pods, whole[: CHURN_NODES * PER_NODE], autopilot(THRESHOLD), THRESHOLD.total_seconds()
        ),
    )
    rows.append(a)
    decided = decision_time()
    print(
        f"trace: {len(pods):,} GPU pods (Alibaba openb 2023, Weng et al. ATC'23) on H100-80GB MIG; "
        f"fill: {FILL_NODES}x{PER_NODE} GPUs to {FILL_TO:.0%}, churn: {CHURN_NODES}x{PER_NODE} GPUs"
    )
    head = (
        f"{'policy':<40}{'fill@100%':>10}{'fill@130%':>10}{'churn placed':>13}"
        f"{'pend p50':>10}{'pend p95':>10}{'reconf/GPU/day':>15}{'max/GPU/day':>12}{'evicted':>8}"
    )
    print(head)
    for name, f, c in rows:
        mark = " *" if name == best_homo[0] else ""
        print(
            f"{name + mark:<40}{f.at_100:>10.1%}{f.at_end:>10.1%}{c.placed:>13.1%}"
            f"{_dur(c.p50):>10}{_dur(c.p95):>10}{c.per_gpu_day:>15.3f}{c.max_gpu_day:>12}"
            f"{f.evictions + c.evictions:>8}"
        )
    print("* the best static homogeneous layout in hindsight")
    print(
        f"oracle: per column the best of {len(fills)} static layouts in hindsight (the "
        "homogeneous ones, three demand mixes packed, each mix's fractional part beside "
        f"{len(WHOLE_SHARES)} whole-GPU shares)"
    )
    checks = [
        ("autopilot >= oracle (fill @130%)", a[1].at_end >= oracle[1].at_end),
        ("autopilot >= oracle (churn placed)", a[2].placed >= oracle[2].placed),
        ("autopilot > greedy (fill @130%)", a[1].at_end > g[1].at_end),
        ("autopilot > greedy (churn placed)", a[2].placed > g[2].placed),
        ("autopilot <= 1 reconfiguration per GPU per day", a[2].max_gpu_day <= 1),
        ("autopilot 0 evictions", a[1].evictions + a[2].evictions == 0),
        (f"one decision, 1,000 nodes x 8 GPUs: {decided:.3f} s < 1 s", decided < 1.0),
    ]
    for text, ok in checks:
        print(f"target {'met    ' if ok else 'NOT MET'}  {text}")
    print(f"bench took {time.perf_counter() - started:.0f} s")


def _dur(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < DAY:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / DAY:.1f} d"


if __name__ == "__main__":
    main()
