"""Builders and an independent brute-force oracle for the geometry tests.

The oracle shares nothing with the solver but the catalog data: it tries every
combination of start slots per profile and checks overlaps on sets of slots.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from tessera.api.v1alpha1.nodepoolgeometry import MigLayout, VnpuLayout
from tessera.domain.geometry.catalog import GpuModel


def _devices(devices: int | str | list[int]) -> int | str:
    """A list of indexes written the way a manifest would: ``[0, 5]`` -> ``"0,5"``."""
    return ",".join(map(str, devices)) if isinstance(devices, list) else devices


def layout(
    devices: int | str | list[int] = "all", profiles: Mapping[str, int] | None = None
) -> MigLayout:
    return MigLayout(devices=_devices(devices), profiles=dict(profiles or {}))


def vnpu(
    devices: int | str | list[int] = "all", templates: Mapping[str, int] | None = None
) -> VnpuLayout:
    return VnpuLayout(devices=_devices(devices), templates=dict(templates or {}))


def brute_force_valid(model: GpuModel, counts: Mapping[str, int]) -> bool:
    counts = {n: c for n, c in counts.items() if c}
    if any(model.profile(n) is None for n in counts):
        return False
    profiles = {n: model.profile(n) for n in counts}
    if any(c > profiles[n].max_instances for n, c in counts.items()):  # type: ignore[union-attr]
        return False
    if sum(counts.values()) > model.max_instances:
        return False
    if sum(c for n, c in counts.items() if "+me" in n) > 1:
        return False
    choices = [
        itertools.combinations(profiles[n].starts, c)  # type: ignore[union-attr]
        for n, c in counts.items()
    ]
    for pick in itertools.product(*(list(c) for c in choices)):
        taken: set[int] = set()
        ok = True
        for (name, _), starts in zip(counts.items(), pick, strict=True):
            size = profiles[name].size  # type: ignore[union-attr]
            for s in starts:
                slots = set(range(s, s + size))
                if taken & slots or max(slots) >= model.grid:
                    ok = False
                taken |= slots
        if ok:
            return True
    return False


def assert_placement_sound(model: GpuModel, counts: Mapping[str, int], instances: list) -> None:
    """Every instance at an allowed start, no overlap, sizes from the catalog, counts match."""
    taken: set[int] = set()
    seen: dict[str, int] = {}
    for inst in instances:
        profile = model.profile(inst.profile)
        assert profile is not None
        assert inst.start in profile.starts and inst.size == profile.size
        slots = set(range(inst.start, inst.start + inst.size))
        assert not taken & slots, f"{inst} overlaps"
        taken |= slots
        seen[inst.profile] = seen.get(inst.profile, 0) + 1
    assert seen == {n: c for n, c in counts.items() if c}
    sizes = [i.size for i in instances]
    assert sizes == sorted(sizes, reverse=True), "creation order is biggest first"
