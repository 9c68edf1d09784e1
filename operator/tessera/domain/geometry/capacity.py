"""Is a pool's MIG layout possible on a node, and what will that node advertise afterwards.

The rollout engine validates a node's layouts before it disrupts anything, and
verifies a node after the MIG manager reports success by comparing allocatable
with ``mig_capacity``. Both derive from the same per-GPU resolution
(``layouts.per_device``), so they cannot disagree.

Resource names follow the NVIDIA device plugin: under ``mixed`` each profile is
``nvidia.com/mig-<profile>`` with ``+`` written as ``.`` (``1g.10gb+me`` ->
``nvidia.com/mig-1g.10gb.me``; resource names cannot hold ``+``), and GPUs with
MIG disabled stay ``nvidia.com/gpu``. Under ``single`` every MIG device is an
``nvidia.com/gpu``, and the plugin refuses a node whose GPUs mix MIG on and off
or carry more than one profile (docs/facts/nvidia.md §MIG strategies). Zero counts are omitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tessera.api.v1alpha1.nodepoolgeometry import MigLayout
from tessera.domain.geometry import placement
from tessera.domain.geometry.catalog import GpuModel
from tessera.domain.geometry.layouts import GeometryError, index_ranges, per_device

Strategy = Literal["single", "mixed"]
WHOLE_GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """The answer for one node: valid or not, a reason naming GPUs, and each GPU's placement."""

    valid: bool
    reason: str
    placements: tuple[placement.Placement, ...]  # one per GPU index


def mig_resource(profile: str) -> str:
    return "nvidia.com/mig-" + profile.replace("+", ".")


_node_cache: dict[tuple[object, ...], NodeVerdict] = {}
_NODE_CACHE_LIMIT = 20_000


def validate_mig_node(
    model: GpuModel, gpu_count: int, layouts: Sequence[MigLayout], strategy: Strategy = "mixed"
) -> NodeVerdict:
    """Check every GPU of a node; the reason names the GPU indexes, profiles and collisions.

    Memoised per (model, GPU count, layouts, strategy): a pool's nodes share them.
    """
    key = (model.id, gpu_count, strategy, *(_layout_key(lay) for lay in layouts))
    hit = _node_cache.get(key)
    if hit is None:
        if len(_node_cache) >= _NODE_CACHE_LIMIT:
            _node_cache.clear()
        hit = _node_cache[key] = _validate(model, gpu_count, layouts, strategy)
    return hit


def clear_cache() -> None:
    """Forget memoised node verdicts and placements (benchmarks measure a cold start)."""
    _node_cache.clear()
    placement.clear_cache()


def _layout_key(layout: MigLayout) -> tuple[object, ...]:
    return (layout.devices, *sorted(layout.profiles.items()))


def _validate(
    model: GpuModel, gpu_count: int, layouts: Sequence[MigLayout], strategy: Strategy
) -> NodeVerdict:
    try:
        counts = per_device([(lay.devices, lay.profiles) for lay in layouts], gpu_count)
    except GeometryError as err:
        return NodeVerdict(False, str(err), ())
    placements = tuple(placement.place(model, dict(c)) for c in counts)
    bad: dict[str, list[int]] = {}
    for index, result in enumerate(placements):
        if not result.valid:
            bad.setdefault(result.reason, []).append(index)
    if bad:
        reason = "; ".join(f"{_gpus(indexes)} ({model.id}): {why}" for why, indexes in bad.items())
        return NodeVerdict(False, reason, placements)
    problem = _single_problem(counts) if strategy == "single" else None
    if problem:
        return NodeVerdict(False, problem, placements)
    return NodeVerdict(True, f"{gpu_count} x {model.id}: every GPU's layout fits", placements)


def mig_capacity(
    model: GpuModel, gpu_count: int, layouts: Sequence[MigLayout], strategy: Strategy = "mixed"
) -> dict[str, int]:
    """Resource name -> count the node advertises once the layouts are applied.

    Raises GeometryError when the layouts are not valid for the node (see
    ``validate_mig_node``): an impossible layout has no capacity to promise.
    """
    verdict = validate_mig_node(model, gpu_count, layouts, strategy)
    if not verdict.valid:
        raise GeometryError(verdict.reason)
    out: dict[str, int] = {}
    for result in verdict.placements:
        if not result.instances:
            out[WHOLE_GPU] = out.get(WHOLE_GPU, 0) + 1
        for instance in result.instances:
            name = WHOLE_GPU if strategy == "single" else mig_resource(instance.profile)
            out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items()))


def _single_problem(counts: tuple[placement.Counts, ...]) -> str | None:
    enabled = [i for i, c in enumerate(counts) if c]
    if enabled and len(enabled) != len(counts):
        off = [i for i, c in enumerate(counts) if not c]
        return (
            f"MIG strategy single needs MIG on every GPU or on none, but {_gpus(off)} "
            f"would have MIG disabled while {_gpus(enabled)} have it enabled"
        )
    kinds = sorted({name for c in counts for name, _ in c})
    if len(kinds) > 1:
        return (
            f"MIG strategy single allows one profile per node, the layouts use "
            f"{', '.join(kinds)}; use strategy mixed or a single profile"
        )
    return None


def _gpus(indexes: Sequence[int]) -> str:
    return f"GPU{'s' if len(indexes) > 1 else ''} {index_ranges(indexes)}"
