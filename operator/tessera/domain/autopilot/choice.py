"""The choice: which idle GPUs change layout, to what, and why — or why nothing fits.

Given the pool's GPUs, what pends and the bounds, ``decide`` finds the demand that counts
(pended past the threshold, not served by free instances, within the maximum counts), packs
it into the fewest GPUs of each model (``geometry.packing``: a GPU's content is always a
valid MIG layout), and puts each packed layout on an idle GPU still under its daily
reconfiguration limit, keeping as many of that GPU's current instances as still fit and
filling the slots left with the biggest allowed profiles (``_fill``). A busy
GPU is never chosen, so a change evicts no pod.

A pod that needs several whole GPUs on one node (``Pending.together``, a pod of N whole
GPUs) is not served by free whole GPUs scattered over the pool, so it is not counted pool
wide: it gets the node that holds it with the fewest idle GPUs made whole, or none if one
holds it already (``_together``), one such pod per node per decision.

Hysteresis, so the loop never flaps: demand counts only after the pend threshold; an
instance is given up only on an idle GPU, never below the declared minimum, and a GPU whose
current instances serve pods that pend (even below the threshold) is chosen last; each GPU
changes at most ``per_gpu_per_day`` times a day. A pool that meets its demand is left alone.

Cost: GPUs with equal (model, layout, reconfigurations today) are one class, so choosing a
GPU for a layout is a pass over the classes, not the GPUs (1,000 nodes x 8 GPUs: well under
a second, bench.autopilot measures it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tessera.domain.autopilot import demand as d
from tessera.domain.autopilot.bounds import Bounds, problems
from tessera.domain.geometry import catalog, explaining, packing, placement

_LIST_GPUS = 4  # GPUs named in a headline before "and N more"


@dataclass(frozen=True, slots=True)
class LayoutChange:
    """One GPU's new layout; ``serves`` are the instances added for pending pods."""

    gpu: d.Gpu
    layout: d.Counts
    serves: d.Counts
    reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    """What the autopilot does now: the changes, the demand left unmet, and why."""

    changes: tuple[LayoutChange, ...]
    unmet: d.Counts  # counted demand no change serves
    reason: str

    @property
    def nothing_fits(self) -> bool:
        """Demand counts, and no allowed change serves any of it."""
        return not self.changes and bool(self.unmet)


def decide(gpus: Sequence[d.Gpu], wants: Sequence[d.Pending], bounds: Bounds) -> Decision:
    """The layout changes that serve the counted demand with the fewest GPUs reconfigured."""
    if not bounds.enabled:
        return Decision((), (), "the autopilot is off (enabled: false): no layout changes")
    wrong = problems(bounds)
    if wrong:
        return Decision((), (), "the bounds are invalid: " + "; ".join(wrong))
    counted = d.counted(wants, bounds.pend_threshold)
    if not counted:
        return Decision((), (), quiet(wants, bounds))
    free, totals = d.free(gpus), d.totals(gpus)
    pending = {w.profile for w in wants if w.pods > 0}
    changes, apart, notes = _together(gpus, wants, totals, pending, bounds)
    for change in changes:
        d.add(totals, change.gpu.layout, -1)
        d.add(totals, change.layout)
    single = d.counted([w for w in wants if not _handled(w, apart)], bounds.pend_threshold)
    unmet, more = _unmet(single, free, totals, bounds)
    notes.extend(more)
    head = headline(counted)
    changed = {c.gpu.name for c in changes}
    for model, group in _groups([g for g in gpus if g.name not in changed], bounds):
        allowed = set(bounds.allowed(model))
        part = {p: n for p, n in unmet.items() if n and p in allowed}
        if not part:
            continue
        for change in _place(model, group, part, allowed, totals, pending, bounds):
            changes.append(change)
            d.add(unmet, change.serves, -1)
            d.add(totals, change.gpu.layout, -1)
            d.add(totals, change.layout)
    d.add(unmet, apart["unmet"].items())
    left = d.counts({p: n for p, n in unmet.items() if n > 0})
    if not changes and not left:
        return Decision((), (), f"{head}; " + "; ".join(notes))
    return Decision(tuple(changes), left, _explain(head, changes, left, gpus, bounds, notes))


def _handled(want: d.Pending, apart: Mapping[str, Mapping[str, int]]) -> bool:
    return want.together > 1 and want.profile in apart["profiles"]


def _together(
    gpus: Sequence[d.Gpu],
    wants: Sequence[d.Pending],
    totals: Mapping[str, int],
    pending: set[str],
    bounds: Bounds,
) -> tuple[list[LayoutChange], dict[str, dict[str, int]], list[str]]:
    """Pods that need several whole GPUs on one node: free instances elsewhere do not serve
    them, so each counted pod gets the node that needs fewest idle GPUs made whole (none if
    it fits already), biggest pods first; a node serves one such pod per decision.

    Returns the changes, ``{"profiles": the profiles handled here, "unmet": instances no node
    can hold}``, and notes for the reason."""
    asks = [w for w in wants if w.together > 1 and w.pods > 0 and w.pended >= bounds.pend_threshold]
    apart: dict[str, dict[str, int]] = {"profiles": {}, "unmet": {}}
    changes: list[LayoutChange] = []
    notes: list[str] = []
    if not asks:
        return changes, apart, notes
    nodes: dict[str, list[d.Gpu]] = {}
    for gpu in sorted(gpus, key=lambda g: (g.node, g.index)):
        nodes.setdefault(gpu.node, []).append(gpu)
    reserved: set[str] = set()
    lost: dict[str, int] = {}
    for want in sorted(asks, key=lambda w: (-w.together, w.profile)):
        target = ((want.profile, 1),)
        for _ in range(max(1, want.pods // want.together)):
            best: tuple[int, str, list[tuple[d.Gpu, d.Counts]]] | None = None
            for node, members in nodes.items():
                if node in reserved:
                    continue
                model = catalog.resolve(members[0].model)
                if want.profile not in bounds.allowed(model) or not _whole(model, target):
                    continue
                apart["profiles"][want.profile] = 1
                ready = sum(1 for g in members if g.idle and g.layout == target)
                need = want.together - ready
                if need <= 0:
                    best = (0, node, [])
                    break
                able = [
                    g
                    for g in members
                    if g.idle
                    and g.layout != target
                    and g.reconfigured_today < bounds.per_gpu_per_day
                ]
                able.sort(key=lambda g: (sum(n for p, n in g.layout if p in pending), g.index))
                picked = _within_minimum(able, need, totals, lost, bounds)
                if picked is not None and (best is None or need < best[0]):
                    best = (need, node, [(g, target) for g in picked])
            if best is None:
                if want.profile in apart["profiles"]:
                    apart["unmet"][want.profile] = (
                        apart["unmet"].get(want.profile, 0) + want.together
                    )
                    notes.append(
                        f"a pod wants {want.together} x {want.profile} on one node: no node "
                        f"has {want.together} GPUs free or idle and still allowed to change today"
                    )
                continue
            _, node, chosen = best
            reserved.add(node)
            ask = f"a pod wants {want.together} x {want.profile} on one node: {node}"
            notes.append(
                f"{ask} holds it once {len(chosen)} idle GPU(s) there are made whole"
                if chosen
                else f"{ask} holds it already"
            )
            for gpu, layout in chosen:
                model = catalog.resolve(gpu.model)
                d.add(lost, gpu.layout)
                changes.append(
                    LayoutChange(gpu, layout, layout, _change_reason(model, gpu, layout, layout))
                )
    return changes, apart, notes


def quiet(wants: Sequence[d.Pending], bounds: Bounds) -> str:
    young = [w for w in wants if w.pods > 0]
    if not young:
        return "no pod pends: the layouts stay"
    n = sum(w.pods for w in young)
    return (
        f"{d.pods(n)} pend, none yet for {d.duration(bounds.pend_threshold)} "
        "(the pend threshold): the layouts stay"
    )


def headline(counted: Mapping[str, d.Pending]) -> str:
    parts = [
        f"{d.pods(w.pods)} want {w.profile} for {d.duration(w.pended)}"
        for w in sorted(counted.values(), key=lambda w: (-w.pods, w.profile))
    ]
    return ", ".join(parts)


def _unmet(
    counted: Mapping[str, d.Pending],
    free: Mapping[str, int],
    totals: Mapping[str, int],
    bounds: Bounds,
) -> tuple[dict[str, int], list[str]]:
    unmet: dict[str, int] = {}
    notes: list[str] = []
    for profile, want in sorted(counted.items()):
        n = want.pods - free.get(profile, 0)
        if n <= 0:
            notes.append(f"{free[profile]} free {profile} instance(s) already serve them")
            continue
        high = bounds.maximum.get(profile)
        if high is not None and totals.get(profile, 0) + n > high:
            room = max(0, high - totals.get(profile, 0))
            notes.append(
                f"maximum[{profile}] is {high} and the pool has {totals.get(profile, 0)}: "
                f"{'only ' + str(room) + ' more' if room else 'no more'}"
            )
            n = room
        if n:
            unmet[profile] = n
    return unmet, notes


def _groups(gpus: Sequence[d.Gpu], bounds: Bounds) -> list[tuple[catalog.GpuModel, list[d.Gpu]]]:
    """Idle GPUs under their daily limit, by model, the model with most of them first."""
    by_model: dict[str, list[d.Gpu]] = {}
    for gpu in gpus:
        if gpu.idle and gpu.reconfigured_today < bounds.per_gpu_per_day:
            by_model.setdefault(gpu.model, []).append(gpu)
    out = [(catalog.resolve(m), g) for m, g in by_model.items()]
    out.sort(key=lambda pair: (-len(pair[1]), pair[0].id))
    return out


def _place(
    model: catalog.GpuModel,
    group: list[d.Gpu],
    part: dict[str, int],
    allowed: set[str],
    totals: Mapping[str, int],
    pending: set[str],
    bounds: Bounds,
) -> list[LayoutChange]:
    packed = packing.pack(model, part)
    layouts = [placement.counts_key(dict(_instances(p))) for p in packed.gpus]
    classes: dict[tuple[d.Counts, int], list[d.Gpu]] = {}
    for gpu in sorted(group, key=lambda g: (g.node, g.index)):
        classes.setdefault((gpu.layout, gpu.reconfigured_today), []).append(gpu)
    menu = _menu(model, allowed, bounds)
    lost: dict[str, int] = {}
    out: list[LayoutChange] = []
    for target in layouts:
        best: tuple[tuple[int, int, int, str, int], d.Counts, d.Gpu] | None = None
        for (current, today), members in classes.items():
            if not members:
                continue
            kept = _fill(model, _keep(model, target, current, allowed), menu)
            gone = _minus(current, kept)
            if any(
                totals.get(p, 0) - lost.get(p, 0) - n < bounds.minimum.get(p, 0) for p, n in gone
            ):
                continue  # giving these up would break a declared minimum
            hurt = sum(n for p, n in gone if p in pending)
            score = (hurt, sum(n for _, n in gone), today, members[0].node, members[0].index)
            if best is None or score < best[0]:
                best = (score, kept, members[0])
        if best is None:
            break  # no idle GPU left that may change
        _, layout, gpu = best
        classes[(gpu.layout, gpu.reconfigured_today)].pop(0)
        if layout == gpu.layout:
            continue
        d.add(lost, _minus(gpu.layout, layout))
        serves = d.counts({p: min(n, part.get(p, 0)) for p, n in _minus(layout, gpu.layout)})
        d.add(part, serves, -1)
        out.append(LayoutChange(gpu, layout, serves, _change_reason(model, gpu, layout, serves)))
    return out


def _within_minimum(
    able: Sequence[d.Gpu],
    need: int,
    totals: Mapping[str, int],
    lost: Mapping[str, int],
    bounds: Bounds,
) -> list[d.Gpu] | None:
    """``need`` of ``able``, in order, whose instances together may be given up without going
    below a declared minimum; None when there are not that many."""
    gone = dict(lost)
    out: list[d.Gpu] = []
    for gpu in able:
        if len(out) == need:
            break
        if all(
            totals.get(p, 0) - gone.get(p, 0) - n >= bounds.minimum.get(p, 0) for p, n in gpu.layout
        ):
            d.add(gone, gpu.layout)
            out.append(gpu)
    return out if len(out) == need else None


def _whole(model: catalog.GpuModel, layout: d.Counts) -> bool:
    """One instance that takes the whole GPU."""
    if len(layout) != 1 or layout[0][1] != 1:
        return False
    profile = model.by_name.get(layout[0][0])
    return profile is not None and profile.compute_slices == model.compute_slices


def _instances(p: placement.Placement) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in p.instances:
        out[i.profile] = out.get(i.profile, 0) + 1
    return out


def _keep(
    model: catalog.GpuModel, target: d.Counts, current: d.Counts, allowed: set[str]
) -> d.Counts:
    """``target`` plus as many of ``current``'s instances as still fit, biggest first."""
    have = dict(target)
    for name, n in explaining.ordered(model, current):
        if name not in allowed:
            continue
        for _ in range(n - min(n, dict(target).get(name, 0))):
            have[name] = have.get(name, 0) + 1
            if not placement.fits(model, placement.counts_key(have)):
                have[name] -= 1
                break
    return placement.counts_key(have)


def _menu(model: catalog.GpuModel, allowed: set[str], bounds: Bounds) -> list[str]:
    """What fills a changed GPU's free slots: allowed profiles without a declared maximum,
    biggest first, so no slot is left unpartitioned and later demand of any size finds room
    (filling with the profile that pended instead measured worse on the trace: bench.autopilot)."""
    names = [p for p in model.profiles if p.name in allowed and p.name not in bounds.maximum]
    names.sort(key=lambda p: (-p.size, -p.compute_slices, p.media_extension, p.name))
    return [p.name for p in names]


def _fill(model: catalog.GpuModel, layout: d.Counts, menu: Sequence[str]) -> d.Counts:
    have = dict(layout)
    for name in menu:
        while True:
            have[name] = have.get(name, 0) + 1
            if not placement.fits(model, placement.counts_key(have)):
                have[name] -= 1
                break
    return placement.counts_key(have)


def _minus(a: d.Counts, b: d.Counts) -> d.Counts:
    rest = dict(a)
    d.add(rest, b, -1)
    return d.counts(rest)


def _change_reason(model: catalog.GpuModel, gpu: d.Gpu, layout: d.Counts, serves: d.Counts) -> str:
    before = explaining.fmt_counts(explaining.ordered(model, gpu.layout))
    after = explaining.fmt_counts(explaining.ordered(model, layout))
    served = explaining.fmt_counts(explaining.ordered(model, serves))
    return f"GPU {gpu.name} ({model.id}) is idle: {before} -> {after}, for {served}"


def _explain(
    headline: str,
    changes: Sequence[LayoutChange],
    left: d.Counts,
    gpus: Sequence[d.Gpu],
    bounds: Bounds,
    notes: Sequence[str],
) -> str:
    parts = [headline]
    if changes:
        names = [c.gpu.name for c in changes]
        parts.append(
            f"GPU{'s' if len(names) > 1 else ''} {_names(names)} "
            f"{'are' if len(names) > 1 else 'is'} idle"
        )
    parts.extend(notes)
    if left:
        parts.append(
            ("nothing fits: " if not changes else "still unmet: ")
            + explaining.fmt_counts(left)
            + " — "
            + _why_not(left, gpus, bounds)
        )
    return "; ".join(parts)


def _names(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b, c and d``, ``a, b, c, d and 5 more``."""
    if len(names) > _LIST_GPUS:
        return ", ".join(names[:_LIST_GPUS]) + f" and {len(names) - _LIST_GPUS} more"
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def _why_not(left: d.Counts, gpus: Sequence[d.Gpu], bounds: Bounds) -> str:
    """Why the rest cannot be served: no idle GPU, the daily limit, or the profiles allowed."""
    models = {g.model for g in gpus}
    hosts = {name for m in models for name in bounds.allowed(catalog.resolve(m))}
    foreign = [p for p, _ in left if p not in hosts]
    if foreign:
        return f"{', '.join(foreign)} is allowed on no GPU model of this pool"
    idle = [g for g in gpus if g.idle]
    if not idle:
        return f"all {len(gpus)} GPUs hold pods, and the autopilot changes idle GPUs only"
    limited = [g for g in idle if g.reconfigured_today >= bounds.per_gpu_per_day]
    if len(limited) == len(idle):
        return (
            f"the {len(idle)} idle GPU(s) changed {bounds.per_gpu_per_day} time(s) today "
            "already (reconfigurationsPerGpuPerDay)"
        )
    return "no idle GPU is left for it (the others hold pods)"
