"""The MIG placement solver: is a multiset of profiles possible on one GPU, and where does each go.

A layout is valid iff every GPU instance can sit at one of its profile's
``-lgipp`` placements without two instances sharing a slot, no profile exceeds
its ``Instances Total``, the GPU's instance limit holds, and at most one
media-extension profile is present (docs/facts/mig.md §Placement rules). Validity is an
exact-cover question, so it is answered by a search over bitmasks, never by
summing slices. Results are memoised per (model, multiset): a cluster repeats
a handful of layouts on thousands of GPUs. Reasons for a refusal are written by
``explaining``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tessera.domain.geometry import explaining
from tessera.domain.geometry.catalog import GpuModel, MigProfile

Counts = tuple[tuple[str, int], ...]  # sorted (profile, count) pairs, counts > 0
_CACHE_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class Instance:
    """One GPU instance: its profile and the grid slots ``[start, start + size)``."""

    profile: str
    start: int
    size: int


@dataclass(frozen=True, slots=True)
class Placement:
    """The answer for one GPU: valid or not, where each instance goes, and why."""

    valid: bool
    model: str
    instances: tuple[Instance, ...]  # in an order in which they can be created
    reason: str

    def as_dict(self) -> dict[str, object]:
        """The JSON shape of ``tessera geometry check -o json``."""
        return {
            "valid": self.valid,
            "model": self.model,
            "placement": [
                {"profile": i.profile, "start": i.start, "size": i.size} for i in self.instances
            ],
            "reason": self.reason,
        }


_cache: dict[tuple[str, Counts], Placement] = {}


def clear_cache() -> None:
    """Forget memoised answers (benchmarks measure a cold start with it)."""
    _cache.clear()


def counts_key(profiles: Mapping[str, int]) -> Counts:
    """The canonical, hashable form of a profile multiset (zero counts dropped)."""
    return tuple(sorted((name, count) for name, count in profiles.items() if count))


def place(model: GpuModel, profiles: Mapping[str, int]) -> Placement:
    """Decide one GPU's layout; memoised, so repeated layouts cost a dictionary lookup."""
    key = (model.id, counts_key(profiles))
    hit = _cache.get(key)
    if hit is None:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        hit = _cache[key] = solve(model, key[1])
    return hit


def solve(model: GpuModel, counts: Counts) -> Placement:
    """The uncached decision for a canonical multiset (see ``counts_key``)."""
    if not counts:
        return Placement(True, model.id, (), "empty layout: MIG disabled")
    starts = _starts(model, counts)
    if starts is None:
        problem = explaining.rule_violation(model, counts)
        if problem is None:
            problem = explaining.collision(model, expand(model, counts))
        return Placement(False, model.id, (), problem)
    expanded = expand(model, counts)
    instances = sorted(
        (Instance(p.name, s, p.size) for p, s in zip(expanded, starts, strict=True)),
        key=lambda i: (-i.size, i.start),
    )
    where = ", ".join(
        f"{i.profile} at {model.by_name[i.profile].slots(i.start)}" for i in instances
    )
    return Placement(True, model.id, tuple(instances), where)


def fits(model: GpuModel, counts: Counts) -> bool:
    """Validity alone, without building a placement or a reason (for enumeration)."""
    return _starts(model, counts) is not None


def _starts(model: GpuModel, counts: Counts) -> list[int] | None:
    total = media = units = 0
    for name, n in counts:
        profile = model.by_name.get(name)
        if profile is None or n > profile.max_instances:
            return None
        total += n
        units += n * profile.size
        media += n if profile.media_extension else 0
    if total > model.max_instances or media > 1 or units > model.grid:
        return None
    return search(expand(model, counts))


def expand(model: GpuModel, counts: Counts) -> list[MigProfile]:
    """One entry per instance, most constrained first: big profiles, then few placements."""
    out = [model.by_name[name] for name, count in counts for _ in range(count)]
    out.sort(key=lambda p: (-p.size, len(p.starts), p.name))
    return out


def search(instances: list[MigProfile]) -> list[int] | None:
    """Start slot per instance with no two overlapping, or None when none exists.

    Identical profiles take increasing placements (symmetry breaking) and dead
    (index, occupied) states are remembered, so the search stays tiny.
    """
    chosen = [0] * len(instances)
    dead: set[tuple[int, int, int]] = set()

    def go(i: int, used: int, floor: int) -> bool:
        if i == len(instances):
            return True
        state = (i, used, floor)
        if state in dead:
            return False
        profile = instances[i]
        for k in range(floor, len(profile.masks)):
            mask = profile.masks[k]
            if used & mask:
                continue
            chosen[i] = profile.starts[k]
            same_next = i + 1 < len(instances) and instances[i + 1] is profile
            if go(i + 1, used | mask, k + 1 if same_next else 0):
                return True
        dead.add(state)
        return False

    return chosen if go(0, 0, 0) else None
