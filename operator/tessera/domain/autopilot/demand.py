"""Pending demand: which profiles pods wait for, how many, how long, and what is left unmet.

A pod counts once it has pended for the bounds' threshold (``counted``): short waits are
served by the scheduler's next pass or by pods ending, and acting on them is what makes a
loop flap. What the pool already offers free is subtracted (``unmet``): a pod that pends
beside a free instance of its profile waits for the scheduler, not for a new layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

Counts = tuple[tuple[str, int], ...]  # sorted (profile, count) pairs, counts > 0


@dataclass(frozen=True, slots=True)
class Pending:
    """``pods`` pods of one profile that have pended for at least ``pended`` (the youngest).

    ``together``: the instances one pod needs on one node (a pod of N whole GPUs: N); ``pods``
    then counts instances, ``pods / together`` pods."""

    profile: str
    pods: int
    pended: timedelta
    together: int = 1


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as the decision sees it: where it is, its layout, the instances in use."""

    node: str
    index: int
    model: str  # a catalog id (tessera.domain.geometry.catalog)
    layout: Counts
    used: Counts = ()
    reconfigured_today: int = 0

    @property
    def name(self) -> str:
        return f"{self.node}/{self.index}"

    @property
    def idle(self) -> bool:
        return not self.used


def counts(mapping: Mapping[str, int]) -> Counts:
    """The canonical form of a profile multiset (zero counts dropped)."""
    return tuple(sorted((k, v) for k, v in mapping.items() if v > 0))


def add(into: dict[str, int], more: Iterable[tuple[str, int]], sign: int = 1) -> None:
    for name, n in more:
        into[name] = into.get(name, 0) + sign * n


def counted(wants: Sequence[Pending], threshold: timedelta) -> dict[str, Pending]:
    """Per profile, the pods that have pended for ``threshold`` or longer (the longest wait)."""
    out: dict[str, Pending] = {}
    for want in wants:
        if want.pods <= 0 or want.pended < threshold:
            continue
        seen = out.get(want.profile)
        if seen is None:
            out[want.profile] = want
        else:
            out[want.profile] = Pending(
                want.profile, seen.pods + want.pods, max(seen.pended, want.pended)
            )
    return out


def free(gpus: Sequence[Gpu]) -> dict[str, int]:
    """Instances of each profile the pool holds but no pod uses."""
    out: dict[str, int] = {}
    for gpu in gpus:
        add(out, gpu.layout)
        add(out, gpu.used, -1)
    return {k: v for k, v in out.items() if v > 0}


def totals(gpus: Sequence[Gpu]) -> dict[str, int]:
    """Instances of each profile in the pool's layouts, used or not."""
    out: dict[str, int] = {}
    for gpu in gpus:
        add(out, gpu.layout)
    return out


def pods(n: int) -> str:
    return f"{n} pod{'s' if n != 1 else ''}"


def duration(d: timedelta) -> str:
    """A wait as a person says it: ``40 s``, ``6 min``, ``2 h 5 min``."""
    seconds = int(d.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
