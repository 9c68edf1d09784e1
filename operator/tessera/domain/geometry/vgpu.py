"""vGPU layouts of a pool: validity per GPU and node, the vGPU Device Manager's config, capacity.

The vGPU counterpart of ``capacity`` + ``migparted``. NVIDIA's vGPU Device
Manager applies the config a node's ``nvidia.com/vgpu.config`` label names
from its ConfigMap (``version: v1``, ``vgpu-configs``; per entry only
``device-filter``, ``devices``, ``vgpu-devices``: docs/facts/vgpu.md §The config file). Its parser
checks the type grammar and that one map does not mix time-sliced and
MIG-backed types, nothing else: a type the board lacks, two time-sliced types
on one GPU or a count past the maximum fail only on the node, after the VMs'
vGPUs were deleted. ``check_gpu`` refuses them first, naming type, board and rule.

Entries carry no ``device-filter``: the board is checked from the node's
``nvidia.com/gpu.product`` label before anything is written, and a filter
naming a PCI id the catalog lacks would silently match nothing. GPUs no layout
covers get an empty ``vgpu-devices`` (the manager accepts it and deletes their
vGPUs), so capacity is never a guess.

Resources come from the sandbox device plugin: ``nvidia.com/`` + the mdev type
name with spaces as ``_`` — ``nvidia.com/NVIDIA_A100D-20C`` on current vGPU
drivers, ``nvidia.com/GRID_A100D-20C`` on older ones (docs/facts/vgpu.md §Resource names).
``resource_prefix`` picks ``GRID`` only for a node already advertising a
``GRID_`` resource; otherwise ``NVIDIA``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tessera.api.v1alpha1.vgpu import VgpuLayout
from tessera.domain.geometry import catalog, placement
from tessera.domain.geometry.layouts import GeometryError, entries, index_ranges, per_device
from tessera.domain.geometry.vgpu_catalog import Board, parse_type

SECTION = "vgpu-configs"
CURRENT, OLDER = "NVIDIA", "GRID"
EQUAL_SIZE = (
    "one time-sliced vGPU type per GPU: a GPU runs in equal-size mode, and the vGPU Device "
    "Manager cannot switch it to mixed-size mode"
)
NO_MIXING = "time-sliced and MIG-backed vGPU types never share a GPU"


@dataclass(frozen=True, slots=True)
class VgpuNodeVerdict:
    valid: bool
    reason: str


def check_gpu(board: Board, counts: Mapping[str, int]) -> str | None:
    """Why ``counts`` (type -> vGPUs) cannot run on one GPU of ``board``; None when it can."""
    counts = {t: n for t, n in counts.items() if n}
    where = f"board {board.id} ({board.name})"
    problems: list[str] = []
    parsed = []
    for name in sorted(counts):
        vtype = parse_type(name)
        if vtype is None:
            problems.append(f"{name} is not a vGPU type name (rule: type grammar)")
        elif vtype.prefix != board.prefix:
            problems.append(
                f"{where} has no vGPU type {name}: its types are named {board.prefix}-* "
                "(rule: the type must exist on the board)"
            )
        elif board.maximum(vtype) is None:
            kind = "MIG-backed" if vtype.mig_backed else "time-sliced"
            offered = ", ".join(board.type_names(vtype.mig_backed)) or "none"
            problems.append(
                f"{where} has no {kind} vGPU type {name}; its {kind} types are {offered} "
                "(rule: the type must exist on the board)"
            )
        else:
            parsed.append(vtype)
    if problems:
        return "; ".join(problems)
    sliced = [t.name for t in parsed if not t.mig_backed]
    backed = [t.name for t in parsed if t.mig_backed]
    if sliced and backed:
        return f"{', '.join(sliced)} with {', '.join(backed)} on {where} (rule: {NO_MIXING})"
    if len(sliced) > 1:
        return f"{' and '.join(sliced)} on one GPU of {where} (rule: {EQUAL_SIZE})"
    for vtype in parsed:
        most = board.maximum(vtype) or 0
        if counts[vtype.name] > most:
            return (
                f"{vtype.name} x{counts[vtype.name]} on {where}: at most {most} per GPU "
                "(rule: count <= the type's maximum)"
            )
    if backed:
        return _mig_placement(board, {t.mig_profile: counts[t.name] for t in parsed}, where)
    return None


def check_boards(boards: Sequence[Board], counts: Mapping[str, int]) -> tuple[Board, str | None]:
    """``check_gpu`` on the board of ``boards`` (the boards of one GPU model, e.g. PCIe and
    SXM4) whose prefix the types use; the first board when none or several match."""
    prefixes = {t.prefix for name in counts if (t := parse_type(name)) is not None}
    chosen = [b for b in boards if b.prefix in prefixes] or list(boards)
    board = chosen[0]
    why = check_gpu(board, counts)
    if why and len(boards) > 1 and not prefixes & {b.prefix for b in boards}:
        named = " or ".join(f"{b.prefix}-* ({b.id})" for b in boards)
        why = f"{why}; this GPU's boards name their types {named}"
    return board, why


def _mig_placement(board: Board, profiles: dict[str, int], where: str) -> str | None:
    """MIG-backed types are MIG instances first: the MIG placement rules decide."""
    assert board.mig_model is not None  # a board without MIG has no MIG-backed types
    result = placement.place(catalog.resolve(board.mig_model), profiles)
    if result.valid:
        return None
    return f"MIG-backed types on {where} as MIG profiles: {result.reason} (rule: MIG placement)"


def validate_vgpu_node(
    board: Board, gpu_count: int, layouts: Sequence[VgpuLayout]
) -> VgpuNodeVerdict:
    """Check every GPU of a node; the reason names the GPU indexes, types, board and rule."""
    try:
        counts = per_device([(lay.devices, lay.types) for lay in layouts], gpu_count)
    except GeometryError as err:
        return VgpuNodeVerdict(False, str(err))
    bad: dict[str, list[int]] = {}
    for index, per_gpu in enumerate(counts):
        why = check_gpu(board, dict(per_gpu))
        if why:
            bad.setdefault(why, []).append(index)
    if bad:
        reason = "; ".join(f"{_gpus(ix)}: {why}" for why, ix in bad.items())
        return VgpuNodeVerdict(False, reason)
    return VgpuNodeVerdict(True, f"{gpu_count} x {board.id}: every GPU's vGPU types fit")


def resource_prefix(allocatable: Mapping[str, int]) -> str:
    """``GRID`` on a node whose sandbox device plugin advertises ``GRID_`` devices (older vGPU
    drivers; a stale ``GRID_<type>: 0`` left after a driver upgrade does not count), else
    ``NVIDIA``. Verification accepts either name (``rollout.targets.alloc_diff``)."""
    older = any(r.startswith(f"nvidia.com/{OLDER}_") and n > 0 for r, n in allocatable.items())
    return OLDER if older else CURRENT


def resource(vgpu_type: str, prefix: str = CURRENT) -> str:
    return f"nvidia.com/{prefix}_{vgpu_type}"


def vgpu_capacity(
    board: Board, gpu_count: int, layouts: Sequence[VgpuLayout], prefix: str = CURRENT
) -> dict[str, int]:
    """Resource name -> count the node advertises once applied; raises GeometryError if invalid."""
    verdict = validate_vgpu_node(board, gpu_count, layouts)
    if not verdict.valid:
        raise GeometryError(verdict.reason)
    out: dict[str, int] = {}
    for per_gpu in per_device([(lay.devices, lay.types) for lay in layouts], gpu_count):
        for name, n in per_gpu:
            out[resource(name, prefix)] = out.get(resource(name, prefix), 0) + n
    return dict(sorted(out.items()))


def vgpu_entries(layouts: Sequence[VgpuLayout]) -> list[dict[str, Any]]:
    """The device manager's entries of one layout set: ``devices`` + ``vgpu-devices`` only."""
    out: list[dict[str, Any]] = []
    for entry in entries([(lay.devices, lay.types) for lay in layouts]):
        devices: Any = entry.devices if isinstance(entry.devices, str) else list(entry.devices)
        out.append({"devices": devices, "vgpu-devices": dict(entry.counts)})
    return out


def _gpus(indexes: Sequence[int]) -> str:
    return f"GPU{'s' if len(indexes) > 1 else ''} {index_ranges(indexes)}"
