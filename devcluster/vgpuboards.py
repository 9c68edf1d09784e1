"""The boards a simulated vGPU host has: which vGPU types each GPU accepts, and how many fit.

From ``vgpu_boards.yaml`` (next to this module), the simulator's own copy of NVIDIA's per-board
type tables; MIG-backed types sit on the board's MIG grid from ``mig_placements.yaml``
(``migmanager.problem``). Nothing here reads Tessera's catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from devcluster import hardware, migmanager
from devcluster.vgpuconfig import VgpuType, parse_type

_ATTR_PROFILE = {"ME": "+me", "NOME": "-me", "MEALL": "+me.all", "GFX": "+gfx"}


@dataclass(frozen=True)
class Board:
    """One GPU board as its vGPU host driver (mdev parents) sees it."""

    key: str
    product: str
    pci: tuple[str, ...]  # device ids, "0x20B5"; the first is a simulated node's
    prefix: str
    memory_gb: int
    mig: str | None  # the mig_placements.yaml model MIG-backed types sit on
    time_sliced: Mapping[str, int]  # "<GB><S>" -> max per GPU
    mig_backed: Mapping[str, int]  # "<g>-<GB><S>[ATTR]" -> max per GPU

    @property
    def device_id(self) -> int:
        """``0x<device><vendor>`` as ``device-filter`` writes it, as a number."""
        return (int(self.pci[0], 16) << 16) | 0x10DE

    def max_of(self, name: str) -> int | None:
        """The type's maximum per GPU on this board; None when the board has no such type."""
        if not name.startswith(self.prefix + "-"):
            return None
        rest = name[len(self.prefix) + 1 :]
        return self.time_sliced.get(rest, self.mig_backed.get(rest))

    def supports(self, name: str) -> bool:
        return self.max_of(name) is not None

    def available(self, name: str, held: Mapping[str, int]) -> int:
        """How many more ``name`` devices one GPU holding ``held`` can create (what the mdev
        parent's ``available_instances`` says): equal-size mode for time-sliced types, the MIG
        grid for MIG-backed ones; never time-sliced and MIG-backed together."""
        cap = self.max_of(name)
        if cap is None:
            return 0
        kind = parse_type(name)
        others = {t: n for t, n in held.items() if n and t != name}
        if any(parse_type(t).mig != kind.mig for t in others):
            return 0
        if not kind.mig:
            return 0 if others else max(0, cap - held.get(name, 0))
        room = 0
        while held.get(name, 0) + room < cap and self._fits(
            {**held, name: held.get(name, 0) + room + 1}
        ):
            room += 1
        return room

    def _fits(self, held: Mapping[str, int]) -> bool:
        if self.mig is None:
            return False
        layout: dict[str, int] = {}
        for name, count in held.items():
            profile = mig_profile(parse_type(name))
            layout[profile] = layout.get(profile, 0) + count
        return migmanager.problem(hardware.gpu(self.mig), layout) is None


def mig_profile(kind: VgpuType) -> str:
    """The MIG profile a MIG-backed type sits on: ``<g>g.<GB>gb`` plus its attribute's suffix."""
    return f"{kind.g}g.{kind.gb}gb{_ATTR_PROFILE.get(kind.attr, '')}"


class UnknownBoardError(KeyError):
    """A board name the simulator's vGPU table does not know."""


@cache
def _boards() -> dict[str, Board]:
    out: dict[str, Board] = {}
    table: dict[str, Any] = yaml.safe_load((hardware.HERE / "vgpu_boards.yaml").read_text())
    for key, row in table.items():
        board = Board(
            key=key,
            product=row["product"],
            pci=tuple(row["pci"]),
            prefix=row["prefix"],
            memory_gb=int(row["memory_gb"]),
            mig=row.get("mig"),
            time_sliced={str(k): int(v) for k, v in (row.get("time_sliced") or {}).items()},
            mig_backed={str(k): int(v) for k, v in (row.get("mig_backed") or {}).items()},
        )
        for name in (key, board.product, *(row.get("names") or ())):
            out[name] = board
    return out


def board(name: str) -> Board:
    """The board ``name`` (table key, another name, or GFD product label) stands for."""
    try:
        return _boards()[name]
    except KeyError:
        raise UnknownBoardError(f"the simulator knows no vGPU board {name!r}") from None


def boards() -> list[Board]:
    """Each board once, in the table's order."""
    return list({b.key: b for b in _boards().values()}.values())
