"""What ``nvidia-vgpu-dm assert`` and ``apply`` do to one node's GPUs (vgpu.md §1.1-1.2).

A node's vGPU devices are a list, one ``{type: count}`` per GPU in PCI order. ``assert``:
every GPU is matched by an entry and holds exactly that entry's devices (a later entry matching
the same GPU overrides). ``apply`` walks the entries in file order and, for each GPU they match
whose devices differ: checks every requested type against the board, **deletes every vGPU
device on the GPU**, then creates the requested ones as long as the board has room
(``vgpuboards.Board.available``); the first shortfall stops the apply with the device
manager's message, leaving that GPU as far as it got — VMs or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from devcluster.vgpuboards import Board
from devcluster.vgpuconfig import Spec, VgpuError

Devices = dict[str, int]
SUFFIXES = ("MEALL", "NOME", "ME", "GFX")  # stripped when the exact MIG-backed name is unknown


def address(index: int) -> str:
    """The simulated PCI address of GPU ``index``."""
    return f"0000:{0x17 + index:02x}:00.0"


def asserted(board: Board, gpus: Sequence[Mapping[str, int]], specs: Sequence[Spec]) -> bool:
    """``assert``: every GPU matched by some entry and holding exactly its devices."""
    matched = [False] * len(gpus)
    for spec in specs:
        for i, held in enumerate(gpus):
            if spec.matches(i, board.device_id):
                matched[i] = _equal(held, spec.vgpu_devices)
    return all(matched)


def apply(
    board: Board,
    gpus: Sequence[Mapping[str, int]],
    specs: Sequence[Spec],
    fail_on: int | None = None,
) -> tuple[list[Devices], str | None]:
    """``apply``: the GPUs' devices afterwards, and the error that stopped it (None: success).

    ``fail_on``: a fault injected at the first GPU the apply changes at or after that index,
    after its devices were deleted (a create the driver refuses).
    """
    state = [dict(g) for g in gpus]
    for spec in specs:
        for i in range(len(state)):
            if not spec.matches(i, board.device_id) or _equal(state[i], spec.vgpu_devices):
                continue
            why = _set(board, state, i, spec.vgpu_devices, fail_on is not None and i >= fail_on)
            if why:
                return state, why
    return state, None


def _set(board: Board, state: list[Devices], i: int, wanted: Mapping[str, int], fail: bool) -> str:
    sanitized: Devices = {}
    for name, count in wanted.items():
        stripped = _strip(name)
        if board.supports(name):
            sanitized[name] = count
        elif board.supports(stripped):
            sanitized[stripped] = count
        else:
            return f"vgpu type {name} is not supported on GPU (index={i}, address={address(i)})"
    state[i] = {}  # ClearVGPUConfig: every vGPU device on the GPU is deleted
    if fail:
        return f"injected fault: unable to create vGPU devices on GPU {i} ({address(i)})"
    for name, count in sorted(sanitized.items()):  # the real one walks a Go map: any order
        made = min(count, board.available(name, state[i]))
        if made:
            state[i][name] = made
        if made < count:
            return (
                f"failed to create {count} {name} vGPU devices on the GPU. ensure '{count}' "
                f"does not exceed the maximum supported instances for '{name}'"
            )
    return ""


def _strip(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _equal(held: Mapping[str, int], wanted: Mapping[str, int]) -> bool:
    have = {k: v for k, v in held.items() if v}
    return len(have) == len(wanted) and all(have.get(k) == v for k, v in wanted.items())


def resources(gpus: Sequence[Mapping[str, int]], mdev_prefix: str = "NVIDIA") -> dict[str, int]:
    """What the sandbox device plugin advertises: one resource per mdev type name, spaces to
    ``_`` (``NVIDIA A100D-20C`` -> ``nvidia.com/NVIDIA_A100D-20C``; older drivers ``GRID``)."""
    out: dict[str, int] = {}
    for held in gpus:
        for name, count in held.items():
            if count:
                key = f"nvidia.com/{mdev_prefix}_{name}"
                out[key] = out.get(key, 0) + count
    return out


__all__ = ["Devices", "VgpuError", "address", "apply", "asserted", "resources"]
