"""Geometry engine throughput: validate and place every GPU of a 10,000-node x 8-GPU cluster.

The operator validates each node's layouts before a rollout and again when it
computes capacity, so the engine must stay far below the cost of the API
writes it guards. This measures the real path (``capacity.validate_mig_node``
memoised per node and per GPU layout) from a cold cache, and in the same run a
naive solver: plain backtracking per GPU with no memo, no symmetry breaking
and no cache, on a slice of the same cluster. A middle row shows the per-GPU
placement memo alone. Target: 80,000 GPUs in < 1 s.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

from tessera.api.v1alpha1 import devices
from tessera.api.v1alpha1.nodepoolgeometry import MigLayout
from tessera.domain.geometry import capacity, catalog, enumeration, placement

NODES = 10_000
GPUS_PER_NODE = 8
POOLS = 200
NAIVE_NODES = 1_000  # the naive solver is timed on this slice and reported per layout
SEED = 7


@dataclass(frozen=True)
class Node:
    model: catalog.GpuModel
    layouts: tuple[MigLayout, ...]


def cluster(seed: int = SEED) -> list[Node]:
    """Pools of one or two models; 90 % of pools pick a valid layout, 10 % a random one,
    30 % override one GPU index; nodes are spread over the pools."""
    rng = random.Random(seed)
    models = catalog.models()
    pools: list[tuple[list[catalog.GpuModel], tuple[MigLayout, ...]]] = []
    for _ in range(POOLS):
        first = rng.choice(models)
        family = [
            m for m in models if m.grid == first.grid and m.profile_names == first.profile_names
        ]
        present = [first, rng.choice(family)] if rng.random() < 0.1 else [first]
        layouts = [MigLayout(devices="all", profiles=_pick(rng, first))]
        if rng.random() < 0.3:
            layouts.append(MigLayout(devices=rng.randrange(8), profiles=_pick(rng, first)))
        pools.append((present, tuple(layouts)))
    nodes = []
    for _ in range(NODES):
        present, layouts = rng.choice(pools)
        nodes.append(Node(rng.choice(present), layouts))
    return nodes


def _pick(rng: random.Random, model: catalog.GpuModel) -> dict[str, int]:
    if rng.random() < 0.9:
        return dict(rng.choice(enumeration.layouts(model)))
    names = rng.choices(model.profile_names, k=rng.randint(1, 6))
    return {n: names.count(n) for n in names}


def naive_valid(model: catalog.GpuModel, profiles: Mapping[str, int]) -> bool:
    """Backtracking over every start of every instance, in the order given, nothing cached."""
    expanded = []
    for name, count in profiles.items():
        profile = model.profile(name)
        if profile is None or count > profile.max_instances:
            return False
        expanded += [profile] * count
    media = sum(1 for p in expanded if p.media_extension)
    if len(expanded) > model.max_instances or media > 1:
        return False

    def go(i: int, used: int) -> bool:
        if i == len(expanded):
            return True
        return any(not used & m and go(i + 1, used | m) for m in expanded[i].masks)

    return go(0, 0)


def run_cached(nodes: list[Node]) -> tuple[float, int]:
    capacity.clear_cache()
    start = time.perf_counter()
    valid = 0
    for node in nodes:
        valid += capacity.validate_mig_node(node.model, GPUS_PER_NODE, node.layouts).valid
    return time.perf_counter() - start, valid


def run_per_gpu(nodes: list[Node]) -> float:
    """The placement memo alone: one ``place`` per GPU, no per-node memo."""
    capacity.clear_cache()
    start = time.perf_counter()
    for node in nodes:
        for layout in _per_gpu(node.layouts):
            placement.place(node.model, layout)
    return time.perf_counter() - start


def run_naive(nodes: list[Node]) -> float:
    start = time.perf_counter()
    for node in nodes:
        for layout in _per_gpu(node.layouts):
            naive_valid(node.model, layout)
    return time.perf_counter() - start


def _per_gpu(layouts: tuple[MigLayout, ...]) -> list[Mapping[str, int]]:
    out: list[Mapping[str, int]] = [{}] * GPUS_PER_NODE
    for layout in layouts:
        targets = devices.parse(layout.devices)  # None: "all"
        for i in range(GPUS_PER_NODE) if targets is None else targets:
            if i < GPUS_PER_NODE:
                out[i] = layout.profiles
    return out


def main() -> None:
    nodes = cluster()
    gpus = len(nodes) * GPUS_PER_NODE
    cached_s, valid_nodes = run_cached(nodes)
    per_gpu_s = run_per_gpu(nodes)
    naive_s = run_naive(nodes[:NAIVE_NODES])
    naive_gpus = NAIVE_NODES * GPUS_PER_NODE
    cached_rate, naive_rate = gpus / cached_s, naive_gpus / naive_s
    print(
        f"cluster: {len(nodes):,} nodes x {GPUS_PER_NODE} GPUs = {gpus:,} GPU layouts, "
        f"{len(catalog.models())} models, {POOLS} pools, {valid_nodes:,} nodes valid"
    )
    print(f"{'solver':<28}{'GPUs':>10}{'seconds':>10}{'layouts/s':>14}")
    print(f"{'tessera (memoised, cold)':<28}{gpus:>10,}{cached_s:>10.3f}{cached_rate:>14,.0f}")
    print(f"{'tessera place() per GPU':<28}{gpus:>10,}{per_gpu_s:>10.3f}{gpus / per_gpu_s:>14,.0f}")
    print(
        f"{'naive (uncached backtrack)':<28}{naive_gpus:>10,}{naive_s:>10.3f}{naive_rate:>14,.0f}"
    )
    verdict = "met" if cached_s < 1.0 else "MISSED"
    print(
        f"ratio tessera/naive: {cached_rate / naive_rate:.1f}x; "
        f"target {gpus:,} GPUs in < 1 s: {verdict} ({cached_s:.3f} s)"
    )


if __name__ == "__main__":
    main()
