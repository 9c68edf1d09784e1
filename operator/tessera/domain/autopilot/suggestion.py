"""``tessera suggest`` without the cluster: a demand file in, a NodePoolGeometry patch out.

A pool's layouts are declared per GPU index for every node of the pool (docs/geometry.md
§Devices of a layout), so a change a person can commit is one index on every node. The
suggestion therefore sees a pool of N nodes as its GPU indexes: index i is one choice, idle
when GPU i is idle on every node, and a pod waiting counts as 1/N of an instance there (a
new layout at index i gives N instances). ``choice.decide`` picks the indexes; the patch
sets ``spec.mig.layouts`` with an explicit layout for each index that changes. Free
instances are counted on every node before the waiting pods are scaled, and an index busy on
any node is busy.

The demand file (docs/autopilot.md §The demand file)::

    pool: h100-inference            # the NodePoolGeometry
    model: H100-80GB                # a catalog id, alias or GFD product label
    nodes: [node-0, node-1]         # the pool's nodes; each has gpus GPUs
    gpus: 8
    layouts: [{devices: all, profiles: {"7g.80gb": 1}}]    # spec.mig.layouts today
    used: {node-0: {0: {"7g.80gb": 1}}}                    # instances pods hold, per GPU
    pending: [{profile: 1g.10gb, pods: 7, for: 6m}]
    bounds: {profiles: [...], minimum: {}, maximum: {}, pendThreshold: 5m,
             reconfigurationsPerGpuPerDay: 1, enabled: true}

Anything it cannot read is a ``DemandFileError`` naming the field: never "no changes".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tessera.domain.autopilot import choice, demand
from tessera.domain.autopilot.bounds import Bounds, problems
from tessera.domain.geometry import catalog, layouts
from tessera.domain.rollout import gates

_KEYS = {"pool", "model", "nodes", "gpus", "layouts", "used", "pending", "bounds"}
_BOUND_KEYS = {
    "enabled",
    "profiles",
    "minimum",
    "maximum",
    "pendThreshold",
    "reconfigurationsPerGpuPerDay",
}


class DemandFileError(ValueError):
    """A demand file that cannot be read; the message names the field."""


@dataclass(frozen=True, slots=True)
class Inputs:
    pool: str
    model: catalog.GpuModel
    nodes: tuple[str, ...]
    current: tuple[demand.Counts, ...]  # per index
    gpus: tuple[demand.Gpu, ...]  # one per index: the index on every node
    wants: tuple[demand.Pending, ...]  # scaled to one node
    pods: tuple[demand.Pending, ...]  # as written
    bounds: Bounds


@dataclass(frozen=True, slots=True)
class Suggestion:
    decision: choice.Decision
    patch: dict[str, Any] | None  # a merge patch of the NodePoolGeometry, None: no change
    lines: tuple[str, ...]  # what to tell the person, first the decision's reason


def read(doc: object) -> Inputs:
    """The decision's inputs from a parsed demand file."""
    if not isinstance(doc, dict):
        raise DemandFileError(
            "a demand file is a mapping with pool, model, nodes, ... (see --help)"
        )
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise DemandFileError(
            f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}"
        )
    for key in ("pool", "model", "nodes", "gpus", "layouts", "pending"):
        if key not in doc:
            raise DemandFileError(f"{key}: missing")
    pool = _str(doc["pool"], "pool")
    try:
        model = catalog.resolve(_str(doc["model"], "model"))
    except catalog.UnknownModelError as err:
        raise DemandFileError(f"model: {err}") from err
    nodes = doc["nodes"]
    if not isinstance(nodes, list) or not nodes:
        raise DemandFileError("nodes: a non-empty list of node names")
    names = tuple(_str(n, "nodes[]") for n in nodes)
    count = doc["gpus"]
    if (
        not isinstance(count, int)
        or isinstance(count, bool)
        or not 1 <= count <= layouts.MAX_DEVICES
    ):
        raise DemandFileError(f"gpus: a whole number from 1 to {layouts.MAX_DEVICES}")
    current = _layouts(doc["layouts"], model, count)
    used = _used(doc.get("used") or {}, names, count)
    pods = tuple(_want(w, i) for i, w in enumerate(_list(doc["pending"], "pending")))
    bounds = _bounds(doc.get("bounds") or {})
    wrong = problems(bounds)
    if wrong:
        raise DemandFileError("bounds: " + "; ".join(wrong))
    return assemble(pool, model, names, current, used, pods, bounds)


def assemble(
    pool: str,
    model: catalog.GpuModel,
    names: tuple[str, ...],
    current: tuple[demand.Counts, ...],
    used: Mapping[tuple[str, int], Mapping[str, int]],
    pods: tuple[demand.Pending, ...],
    bounds: Bounds,
    today: Mapping[int, int] | None = None,
) -> Inputs:
    """The decision's inputs from the pool's nodes, its per-index layouts, the instances pods
    hold per (node, GPU index) and what pends: a demand file and the live cluster
    (``cluster.demand``) both end here, so both paths take one decision. ``today``: per GPU
    index, the layout changes the autopilot already chose today (its daily limit)."""
    changed = today or {}
    gpus = tuple(
        demand.Gpu(pool, i, model.id, current[i], _union(used, i), changed.get(i, 0))
        for i in range(len(current))
    )
    n = len(names)
    wants = tuple(demand.Pending(w.profile, math.ceil(w.pods / n), w.pended) for w in pods)
    return Inputs(pool, model, names, current, gpus, tuple(wants), pods, bounds)


def suggest(inputs: Inputs) -> Suggestion:
    """The decision and the patch that commits it."""
    decision = choice.decide(inputs.gpus, inputs.wants, inputs.bounds)
    lines = [_per_pool(decision, inputs)]
    if inputs.pods and not inputs.wants and inputs.bounds.enabled:
        n = sum(w.pods for w in inputs.pods)
        lines = [f"{demand.pods(n)} pend, and the pool's free instances already serve them"]
    n = len(inputs.nodes)
    for change in decision.changes:
        lines.append(
            f"GPU {change.gpu.index} on each of the {n} node(s) is idle: "
            + change.reason.split(": ", 1)[1]
            + f" ({n} x each instance)"
        )
    if not decision.changes:
        return Suggestion(decision, None, tuple(lines))
    new = list(inputs.current)
    for change in decision.changes:
        new[change.gpu.index] = change.layout
    return Suggestion(decision, patch(new), tuple(lines))


def _per_pool(decision: choice.Decision, inputs: Inputs) -> str:
    """The decision's reason in the pool's words: the pods as written, GPU indexes by node."""
    scaled = choice.headline(demand.counted(inputs.wants, inputs.bounds.pend_threshold))
    if inputs.bounds.enabled and not scaled:
        return choice.quiet(inputs.pods, inputs.bounds)  # nothing has pended long enough
    if not scaled or not decision.reason.startswith(scaled):
        return decision.reason  # off
    parts = decision.reason.split("; ")
    parts[0] = choice.headline(demand.counted(inputs.pods, inputs.bounds.pend_threshold))
    if decision.changes:
        idx = layouts.index_ranges(sorted(c.gpu.index for c in decision.changes))
        many = len(decision.changes) > 1
        parts[1] = (
            f"GPU{'s' if many else ''} {idx} {'are' if many else 'is'} idle on each of "
            f"the {len(inputs.nodes)} node(s)"
        )
    return "; ".join(parts)


def patch(per_index: list[demand.Counts]) -> dict[str, Any]:
    """spec.mig.layouts for the per-index layouts: the commonest as ``all``, the rest by index."""
    common = max(set(per_index), key=lambda c: (per_index.count(c), c))
    out: list[dict[str, Any]] = [{"devices": "all", "profiles": dict(common)}]
    groups: dict[demand.Counts, list[int]] = {}
    for i, c in enumerate(per_index):
        if c != common:
            groups.setdefault(c, []).append(i)
    for c, idx in sorted(groups.items(), key=lambda kv: kv[1]):
        out.append({"devices": layouts.index_ranges(idx), "profiles": dict(c)})
    return {"spec": {"mig": {"layouts": out}}}


def _str(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise DemandFileError(f"{where}: a non-empty string, not {value!r}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise DemandFileError(f"{where}: a list, not {type(value).__name__}")
    return value


def _profiles(value: object, where: str) -> dict[str, int]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in value.items()
    ):
        raise DemandFileError(f"{where}: a mapping of profile -> count, not {value!r}")
    return dict(value)


def _layouts(value: object, model: catalog.GpuModel, count: int) -> tuple[demand.Counts, ...]:
    pairs = []
    for i, lay in enumerate(_list(value, "layouts")):
        if not isinstance(lay, dict):
            raise DemandFileError(f"layouts[{i}]: a mapping with devices and profiles")
        profiles = _profiles(lay.get("profiles", {}), f"layouts[{i}].profiles")
        for name in profiles:
            if model.profile(name) is None:
                raise DemandFileError(f"layouts[{i}].profiles: {model.id} has no profile {name}")
        pairs.append((lay.get("devices", "all"), profiles))
    try:
        return layouts.per_device(pairs, count)
    except layouts.GeometryError as err:
        raise DemandFileError(f"layouts: {err}") from err


def _used(
    value: object, nodes: tuple[str, ...], count: int
) -> dict[tuple[str, int], dict[str, int]]:
    if not isinstance(value, dict):
        raise DemandFileError("used: a mapping of node -> GPU index -> profile -> count")
    out: dict[tuple[str, int], dict[str, int]] = {}
    for node, per_gpu in value.items():
        if node not in nodes:
            raise DemandFileError(f"used: {node!r} is not one of nodes")
        if not isinstance(per_gpu, dict):
            raise DemandFileError(f"used.{node}: a mapping of GPU index -> profile -> count")
        for index, profiles in per_gpu.items():
            if not isinstance(index, int) or not 0 <= index < count:
                raise DemandFileError(f"used.{node}: GPU index {index!r} is not 0-{count - 1}")
            out[(node, index)] = _profiles(profiles, f"used.{node}.{index}")
    return out


def _union(used: Mapping[tuple[str, int], Mapping[str, int]], index: int) -> demand.Counts:
    total: dict[str, int] = {}
    for (_, i), profiles in used.items():
        if i == index:
            demand.add(total, profiles.items())
    return demand.counts(total)


def _want(value: object, i: int) -> demand.Pending:
    if not isinstance(value, dict) or set(value) - {"profile", "pods", "for"}:
        raise DemandFileError(f"pending[{i}]: a mapping of profile, pods and for")
    pods = value.get("pods")
    if not isinstance(pods, int) or isinstance(pods, bool) or pods < 1:
        raise DemandFileError(f"pending[{i}].pods: a whole number of pods, at least 1")
    return demand.Pending(
        _str(value.get("profile"), f"pending[{i}].profile"),
        pods,
        _duration(value.get("for"), f"pending[{i}].for"),
    )


def _duration(value: object, where: str) -> timedelta:
    try:
        return gates.duration(_str(value, where))
    except ValueError as err:
        raise DemandFileError(f"{where}: {err}") from err


def _bounds(value: object) -> Bounds:
    if not isinstance(value, dict):
        raise DemandFileError("bounds: a mapping")
    unknown = sorted(set(value) - _BOUND_KEYS)
    if unknown:
        raise DemandFileError(f"bounds: unknown field(s) {', '.join(unknown)}")
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        raise DemandFileError("bounds.enabled: true or false")
    per_day = value.get("reconfigurationsPerGpuPerDay", 1)
    if not isinstance(per_day, int) or isinstance(per_day, bool):
        raise DemandFileError("bounds.reconfigurationsPerGpuPerDay: a whole number")
    profiles = value.get("profiles", {})
    if not isinstance(profiles, dict):
        raise DemandFileError("bounds.profiles: a mapping of model -> list of profiles")
    threshold = value.get("pendThreshold")
    return Bounds(
        enabled=enabled,
        profiles={str(m): tuple(_list(p, f"bounds.profiles.{m}")) for m, p in profiles.items()},
        minimum=_profiles(value.get("minimum", {}), "bounds.minimum"),
        maximum=_profiles(value.get("maximum", {}), "bounds.maximum"),
        pend_threshold=Bounds().pend_threshold
        if threshold is None
        else _duration(threshold, "bounds.pendThreshold"),
        per_gpu_per_day=per_day,
    )
