"""The fewest GPUs of one model that carry a demand of MIG instances, and a layout for each.

Capacity planning asks "how many H100s for 12 x 1g.10gb and 3 x 3g.40gb?".
This is bin packing where a bin's content must be a valid layout, so the
packer searches over the model's valid layouts (from ``enumeration``): a greedy
pass gives an upper bound, simple counting gives a lower bound, and an exact
depth-first search with memoised dead ends closes the gap. The search only
tries, for the GPU holding the biggest remaining instance, layouts that cannot
take one more of the remaining instances; any optimal packing can be rearranged
into that form, so this prunes without losing optimality. A node budget keeps
huge demands bounded; the answer then says it is not proven optimal.

Limits, so every answer comes back in seconds: a demand totals at most
``MAX_INSTANCES`` instances (a bigger one is a ``DemandError``, not an answer
that never comes), and the exact search only runs while a packing needs at
most ``SEARCH_GPUS`` GPUs (one stack frame per GPU); beyond that the greedy
packing is the answer, marked not proven against the lower bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from tessera.domain.geometry import enumeration, explaining, placement
from tessera.domain.geometry.catalog import GpuModel

Vector = tuple[int, ...]
MAX_INSTANCES = 10_000  # MIG instances in one demand: ~1,430 GPUs of seven instances each
SEARCH_GPUS = 400  # the exact search's depth; Python's recursion limit is 1,000 frames


class DemandError(ValueError):
    """A demand the model cannot serve at all (unknown profile, negative count)."""


@dataclass(frozen=True, slots=True)
class Packing:
    model: str
    gpus: tuple[placement.Placement, ...]
    optimal: bool  # proven minimal (the lower bound was reached or the search completed)
    lower_bound: int

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "gpus": len(self.gpus),
            "optimal": self.optimal,
            "layouts": [{"profiles": dict(_counts(p)), **p.as_dict()} for p in self.gpus],
        }


def _counts(p: placement.Placement) -> list[tuple[str, int]]:
    out: dict[str, int] = {}
    for i in p.instances:
        out[i.profile] = out.get(i.profile, 0) + 1
    return list(out.items())


def pack(model: GpuModel, demand: Mapping[str, int], *, budget: int = 20_000) -> Packing:
    """Minimal number of GPUs for ``demand`` (profile -> instances) and a layout per GPU."""
    for name, n in demand.items():
        if n < 0:
            raise DemandError(f"{name}={n}: counts cannot be negative")
        if model.profile(name) is None:
            raise DemandError(
                f"{model.id} has no MIG profile {name}; its profiles are "
                + ", ".join(model.profile_names)
            )
    total = sum(demand.values())
    if total > MAX_INSTANCES:
        raise DemandError(
            f"the demand totals {total} instances; tessera geometry pack answers demands of "
            f"at most {MAX_INSTANCES} (split a bigger one into parts; their GPUs add up)"
        )
    names = tuple(n for n in model.profile_names if demand.get(n, 0) > 0)
    want: Vector = tuple(demand[n] for n in names)
    if not names:
        return Packing(model.id, (), True, 0)
    menu = _Menu(model, names)
    bound = _lower_bound(model, names, want)
    greedy = _greedy(menu, want)
    best, optimal = greedy, len(greedy) == bound
    search = _Search(model, names, menu, budget)
    tried = min(len(greedy), SEARCH_GPUS + 1)  # every k below it, when it is len(greedy)
    for k in range(bound, tried):
        found = search.within(want, k)
        if found is not None:
            best, optimal = found, True
            break
        if search.exhausted:
            break
    else:
        optimal = optimal or (not search.exhausted and tried == len(greedy))
    gpus = tuple(placement.place(model, dict(zip(names, v, strict=True))) for v in best)
    return Packing(model.id, gpus, optimal, bound)


def describe(packing: Packing, model: GpuModel) -> str:
    """One line per distinct layout, e.g. ``2 x H100-80GB: 3g.40gb x2``."""
    groups: dict[str, int] = {}
    for p in packing.gpus:
        text = explaining.fmt_counts(explaining.ordered(model, _counts(p)))
        groups[text] = groups.get(text, 0) + 1
    return "\n".join(f"{n} x {model.id}: {text}" for text, n in groups.items())


def _lower_bound(model: GpuModel, names: tuple[str, ...], want: Vector) -> int:
    profiles = [model.by_name[n] for n in names]
    media = sum(w for p, w in zip(profiles, want, strict=True) if p.media_extension)
    return max(
        math.ceil(sum(p.size * w for p, w in zip(profiles, want, strict=True)) / model.grid),
        math.ceil(sum(want) / model.max_instances),
        media,
        *(math.ceil(w / p.max_instances) for p, w in zip(profiles, want, strict=True)),
    )


class _Menu:
    """The valid layouts over the demanded profiles, as count vectors, biggest first.

    Validity is closed under removal, so a layout is maximal within ``rest`` iff
    no single instance still demanded can be added to it: ``growable`` lists,
    per layout, the profiles whose addition stays valid.
    """

    def __init__(self, model: GpuModel, names: tuple[str, ...]):
        sizes = [model.by_name[n].size for n in names]
        found = [
            tuple(dict(c).get(n, 0) for n in names)
            for c in enumeration.layouts(model, profiles=names)
        ]
        known = set(found)
        self.blocks = sorted(
            found, key=lambda b: (-sum(s * k for s, k in zip(sizes, b, strict=True)), -sum(b), b)
        )
        self.growable = {
            b: tuple(j for j in range(len(names)) if _plus(b, j) in known) for b in self.blocks
        }

    def maximal_within(self, rest: Vector) -> list[Vector]:
        return [
            b
            for b in self.blocks
            if all(k <= r for k, r in zip(b, rest, strict=True))
            and all(rest[j] <= b[j] for j in self.growable[b])
        ]


def _plus(block: Vector, j: int) -> Vector:
    return (*block[:j], block[j] + 1, *block[j + 1 :])


def _greedy(menu: _Menu, want: Vector) -> list[Vector]:
    out: list[Vector] = []
    rest = want
    while any(rest):
        block = menu.maximal_within(rest)[0]
        out.append(block)
        rest = tuple(r - b for r, b in zip(rest, block, strict=True))
    return out


class _Search:
    """Exact search: can ``rest`` be packed into ``k`` GPUs? Dead ends are remembered."""

    def __init__(self, model: GpuModel, names: tuple[str, ...], menu: _Menu, budget: int):
        self.model, self.names, self.menu = model, names, menu
        self.budget, self.exhausted = budget, False
        self.dead: set[tuple[Vector, int]] = set()

    def within(self, rest: Vector, k: int) -> list[Vector] | None:
        if not any(rest):
            return []
        if k == 0 or (rest, k) in self.dead or self.exhausted:
            return None
        if _lower_bound(self.model, self.names, rest) > k:
            return None
        self.budget -= 1
        if self.budget < 0:
            self.exhausted = True
            return None
        first = max(i for i, r in enumerate(rest) if r)  # names run small to big
        for block in self.menu.maximal_within(rest):
            if not block[first]:
                continue
            after = tuple(r - b for r, b in zip(rest, block, strict=True))
            found = self.within(after, k - 1)
            if found is not None:
                return [block, *found]
        if not self.exhausted:
            self.dead.add((rest, k))
        return None
