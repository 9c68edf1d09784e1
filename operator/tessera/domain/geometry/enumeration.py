"""Every valid and every maximal MIG layout of a model.

People choosing a geometry want the menu, and the packer needs the same list as
its building blocks. Validity is closed under removing an instance (a valid
placement minus one GPU instance is still valid), so the enumeration grows
layouts one instance at a time and never extends an invalid one; that keeps it
to a few hundred solver calls even on the 11-profile RTX PRO 6000.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from tessera.domain.geometry import placement
from tessera.domain.geometry.catalog import GpuModel, resolve

Counts = placement.Counts


def layouts(
    model: GpuModel, *, maximal: bool = False, profiles: Iterable[str] | None = None
) -> tuple[Counts, ...]:
    """Non-empty valid layouts (or only the maximal ones), biggest profiles first.

    ``profiles`` restricts the menu (e.g. to the base profiles without +me); a
    maximal layout is then one to which no allowed profile can be added.
    """
    allowed = model.profile_names if profiles is None else tuple(profiles)
    unknown = sorted(set(allowed) - set(model.profile_names))
    if unknown:
        raise ValueError(f"{model.id} has no MIG profile {', '.join(unknown)}")
    ordered_allowed = tuple(n for n in model.profile_names if n in set(allowed))
    found = _valid(model.id, ordered_allowed)
    if not maximal:
        return found
    return tuple(c for c in found if _is_maximal(model, c, ordered_allowed))


@cache
def _valid(model_id: str, allowed: tuple[str, ...]) -> tuple[Counts, ...]:
    model = resolve(model_id)
    out: list[Counts] = []

    def grow(counts: dict[str, int], first: int) -> None:
        for j in range(first, len(allowed)):
            name = allowed[j]
            counts[name] = counts.get(name, 0) + 1
            key = placement.counts_key(counts)
            if placement.fits(model, key):
                out.append(key)
                grow(counts, j)
            counts[name] -= 1
            if not counts[name]:
                del counts[name]

    grow({}, 0)
    return tuple(sorted(out, key=lambda c: _sort_key(model, c)))


def _sort_key(model: GpuModel, counts: Counts) -> tuple[object, ...]:
    sizes = sorted((model.by_name[n].size for n, k in counts for _ in range(k)), reverse=True)
    return tuple(-s for s in sizes), counts


def _is_maximal(model: GpuModel, counts: Counts, allowed: tuple[str, ...]) -> bool:
    base = dict(counts)
    for name in allowed:
        grown = dict(base)
        grown[name] = grown.get(name, 0) + 1
        if placement.fits(model, placement.counts_key(grown)):
            return False
    return True
