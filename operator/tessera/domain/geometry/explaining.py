"""Why a MIG layout is refused, in words a person can act on.

The solver only needs yes/no; people need to know which rule broke, which
profiles and slots collide, and what would fit instead. Everything here runs
only for refused layouts (and is memoised with them), so it favours clear
text over speed. Pure: no I/O.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable

from tessera.domain.geometry.catalog import GpuModel, MigProfile

Counts = tuple[tuple[str, int], ...]


def fmt_counts(counts: Iterable[tuple[str, int]]) -> str:
    """``3g.40gb x2 + 1g.10gb``; ``nothing`` for an empty multiset."""
    parts = [name if n == 1 else f"{name} x{n}" for name, n in counts if n]
    return " + ".join(parts) or "nothing"


def _slots(start: int, size: int) -> str:
    end = start + size - 1
    return str(start) if end == start else f"{start}-{end}"


def _or_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def rule_violation(model: GpuModel, counts: Counts) -> str | None:
    """The broken per-profile / per-GPU rules, plus what fits instead; None when none broke."""
    problems: list[str] = []
    unknown = []
    for name, n in counts:
        profile = model.profile(name)
        if profile is None:
            same = [p for p in model.profile_names if p.split(".")[0] == name.split(".")[0]]
            near = difflib.get_close_matches(name, same or model.profile_names, n=1, cutoff=0)
            unknown.append(f"{name} (did you mean {near[0]}?)" if near else name)
        elif n > profile.max_instances:
            problems.append(f"{name} x{n} exceeds its limit of {profile.max_instances} per GPU")
    if unknown:
        problems.insert(
            0,
            f"{model.id} has no MIG profile {_or_list(unknown)}; "
            f"its profiles are {', '.join(model.profile_names)}",
        )
    media = [(n, c) for n, c in counts if (p := model.profile(n)) is not None and p.media_extension]
    if len(media) > 1:
        problems.append(
            f"at most one media-extension profile fits on a GPU, asked for {fmt_counts(media)}"
        )
    total = sum(n for _, n in counts)
    if total > model.max_instances:
        problems.append(f"{total} GPU instances exceed the {model.max_instances} a GPU supports")
    if not problems:
        return None
    instead = _instead(model, _clamped(model, counts))
    asked = fmt_counts(ordered(model, counts))
    return f"{asked} is not valid on {model.id}: {'; '.join(problems)}. {instead}"


def ordered(model: GpuModel, counts: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """Biggest profiles first, the way people write layouts (unknown names last)."""

    def weight(name: str) -> tuple[int, int]:
        profile = model.profile(name)
        return (profile.size, profile.compute_slices) if profile else (0, 0)

    return sorted(counts, key=lambda nc: (tuple(-w for w in weight(nc[0])), nc[0]))


def collision(model: GpuModel, instances: list[MigProfile]) -> str:
    """Explain an exact-cover failure: the best partial fit, what it blocks, what fits instead."""
    starts = best_partial(instances, model.max_instances)
    placed = [(p, s) for p, s in zip(instances, starts, strict=True) if s is not None]
    missing = Counter(p.name for p, s in zip(instances, starts, strict=True) if s is None)
    asked = fmt_counts(ordered(model, Counter(p.name for p in instances).items()))
    units = sum(p.size for p in instances)
    lines = [f"they need {units} slots but the GPU has {model.grid}"] if units > model.grid else []
    for name, n in sorted(missing.items()):
        profile = model.by_name[name]
        blockers = [
            f"{p.name} at {_slots(s, p.size)}"
            for p, s in sorted(placed, key=lambda ps: ps[1])
            if _hits(profile, p, s)
        ]
        where = _or_list([profile.slots(s) for s in profile.starts])
        lines.append(
            f"{name}{f' x{n}' if n > 1 else ''} finds no free placement (it can only sit at "
            f"slots {where}), and those are held by {_and_list(blockers)}"
        )
    return f"{asked} does not fit on one {model.id}: {'; '.join(lines)}. " + _instead(
        model, instances, starts
    )


def _and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _hits(profile: MigProfile, other: MigProfile, start: int) -> bool:
    mask = ((1 << other.size) - 1) << start
    return any(m & mask for m in profile.masks)


def _clamped(model: GpuModel, counts: Counts) -> list[MigProfile]:
    """The request cut down to the per-profile, media and instance limits, big profiles first."""
    out: list[MigProfile] = []
    media_left = 1
    for name, n in counts:
        profile = model.profile(name)
        if profile is None:
            continue
        keep = min(n, profile.max_instances)
        if profile.media_extension:
            keep, media_left = min(keep, media_left), media_left - min(keep, media_left)
        out += [profile] * keep
    out.sort(key=lambda p: (-p.size, len(p.starts), p.name))
    return out


def _instead(
    model: GpuModel, instances: list[MigProfile], starts: list[int | None] | None = None
) -> str:
    if starts is None:
        starts = best_partial(instances, model.max_instances)
    counts = Counter(p.name for p, s in zip(instances, starts, strict=True) if s is not None)
    kept = [n for n, _ in ordered(model, counts.items())]
    used = 0
    for p, s in zip(instances, starts, strict=True):
        if s is not None:
            used |= ((1 << p.size) - 1) << s
    free = [i for i in range(model.grid) if not used >> i & 1]
    text = f"Fits instead: {fmt_counts((n, counts[n]) for n in kept)}"
    if not kept:
        text = "Nothing requested fits"
    if not free:
        return text + " (every slot used)."
    has_media = any(model.by_name[n].media_extension for n in kept)
    extra = [
        p.name
        for p in model.profiles
        if counts[p.name] < p.max_instances
        and not (p.media_extension and has_media)
        and any(not (m & used) for m in p.masks)
    ]
    spare = ", ".join(_slots(a, b - a + 1) for a, b in _runs(free))
    noun = "slot" if len(free) == 1 else "slots"
    if extra and sum(counts.values()) < model.max_instances:
        return f"{text}; free {noun} {spare} could still take {_or_list(extra)}."
    return f"{text}; free {noun} {spare} cannot take any further profile."


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def best_partial(instances: list[MigProfile], limit: int) -> list[int | None]:
    """Starts for the largest subset that fits (most instances, then most slots); None = left out."""
    memo: dict[tuple[int, int], tuple[int, int, tuple[int | None, ...]]] = {}

    def best(i: int, used: int) -> tuple[int, int, tuple[int | None, ...]]:
        if i == len(instances):
            return 0, 0, ()
        if (i, used) in memo:
            return memo[i, used]
        n, units, rest = best(i + 1, used)
        answer = (n, units, (None, *rest))
        profile = instances[i]
        for start, mask in zip(profile.starts, profile.masks, strict=True):
            if not used & mask:
                n, units, rest = best(i + 1, used | mask)
                if (n + 1, units + profile.size) > answer[:2]:
                    answer = (n + 1, units + profile.size, (start, *rest))
        memo[i, used] = answer
        return answer

    chosen: list[int | None] = list(best(0, 0)[2])
    for i in sorted(range(len(chosen)), key=lambda k: instances[k].size):
        if sum(s is not None for s in chosen) <= limit:
            break
        chosen[i] = None
    return chosen
