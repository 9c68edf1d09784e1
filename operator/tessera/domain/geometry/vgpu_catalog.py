"""The NVIDIA vGPU catalog: which boards take which vGPU types, and how many fit on one GPU.

The facts live in ``vgpu_catalog.yaml`` (with sources); this module turns them
into frozen values, parses the vGPU Device Manager's type names and resolves
the names people and nodes use for a board: Tessera's board id, the GPU
Feature Discovery ``nvidia.com/gpu.product`` label, or a MIG catalog model id
such as ``A100-40GB``, which names every board built on that GPU (PCIe and
SXM4 differ only in the type prefix: ``A100-20C`` vs ``A100X-20C``).
Pure: reads nothing but its own packaged data file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from tessera.api.v1alpha1.vgpu import TIME_SLICED_PATTERN

_DATA_FILE = "vgpu_catalog.yaml"
_TIME_SLICED = re.compile(TIME_SLICED_PATTERN)
_MIG_BACKED = re.compile(  # the API's MIG_BACKED_PATTERN, with its parts named
    r"^(?P<board>[A-Z0-9]+)-(?P<g>[1-9])-(?P<gb>0|[1-9][0-9]*)(?P<s>[ABCQ])"
    r"(?P<attr>ME|NOME|MEALL|GFX)?$"
)
# vgpu-device-manager's MIG-backed type -> mig-parted profile suffix (api/spec/v1 ToMigConfigSpecSlice)
_MIG_ATTR = {"": "", "ME": "+me", "MEALL": "+me.all", "GFX": "+gfx", "NOME": "-me"}
_SUFFIX = re.compile(r"(-MIG-.*|-SHARED)$", re.IGNORECASE)


class UnknownBoardError(ValueError):
    """A GPU name no vGPU board answers to; the message lists the known boards."""


@dataclass(frozen=True, slots=True)
class VgpuType:
    """A parsed type name: ``A100D-20C`` (time-sliced) or ``A100-1-5CME`` (MIG-backed)."""

    name: str
    prefix: str  # the board part, A100D
    suffix: str  # the table key, 20C / 1-5CME
    mig_backed: bool
    mig_profile: str  # 1g.5gb+me for A100-1-5CME; "" when time-sliced


@dataclass(frozen=True, slots=True)
class Board:
    """One vGPU-capable board: its type prefix, PCI ids, GFD labels and its types' maxima."""

    id: str
    name: str
    prefix: str
    pci_device_ids: tuple[str, ...]
    product_labels: tuple[str, ...]
    aliases: tuple[str, ...]
    table: str
    framebuffer_gb: int
    time_sliced: dict[str, int]  # suffix -> max per GPU (equal-size mode)
    mig_backed: dict[str, int]
    mig_model: str | None  # the MIG catalog model whose placement MIG-backed types follow

    def maximum(self, vtype: VgpuType) -> int | None:
        """Max vGPUs of ``vtype`` per GPU, None when the board has no such type."""
        if vtype.prefix != self.prefix:
            return None
        table = self.mig_backed if vtype.mig_backed else self.time_sliced
        return table.get(vtype.suffix)

    def type_names(self, mig_backed: bool) -> tuple[str, ...]:
        table = self.mig_backed if mig_backed else self.time_sliced
        return tuple(f"{self.prefix}-{s}" for s in table)

    @property
    def device_filters(self) -> tuple[str, ...]:
        """The device manager's ``device-filter`` values: ``0x<device><vendor 10DE>``."""
        return tuple(f"{i}10DE" for i in self.pci_device_ids)


def parse_type(name: str) -> VgpuType | None:
    """The parts of a vGPU type name, None when it matches neither of the manager's grammars."""
    mig = _MIG_BACKED.match(name)
    if mig:
        attr = mig["attr"] or ""
        profile = f"{mig['g']}g.{mig['gb']}gb{_MIG_ATTR[attr]}"
        suffix = f"{mig['g']}-{mig['gb']}{mig['s']}{attr}"
        return VgpuType(name, mig["board"], suffix, True, profile)
    if _TIME_SLICED.match(name):
        prefix, _, suffix = name.rpartition("-")
        return VgpuType(name, prefix, suffix, False, "")
    return None


def _board(row: dict[str, Any], tables: dict[str, Any]) -> Board:
    table = tables[row["table"]]
    return Board(
        id=str(row["id"]),
        name=str(row["name"]),
        prefix=str(row["prefix"]),
        pci_device_ids=tuple(str(i) for i in row["pci_device_ids"]),
        product_labels=tuple(str(x) for x in row.get("product_labels", ())),
        aliases=tuple(str(x) for x in row.get("aliases", ())),
        table=str(row["table"]),
        framebuffer_gb=int(table["framebuffer_gb"]),
        time_sliced={str(k): int(v) for k, v in (table.get("time_sliced") or {}).items()},
        mig_backed={str(k): int(v) for k, v in (table.get("mig_backed") or {}).items()},
        mig_model=str(row["mig_model"]) if row.get("mig_model") else None,
    )


@cache
def _load() -> tuple[tuple[Board, ...], dict[str, tuple[Board, ...]]]:
    text = resources.files(__package__).joinpath(_DATA_FILE).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    boards = tuple(_board(row, data["tables"]) for row in data["boards"])
    index: dict[str, tuple[Board, ...]] = {}
    for board in boards:
        for name in (board.id, *board.aliases, *board.product_labels):
            for key in _keys(name):
                if index.setdefault(key, (board,)) != (board,):
                    raise ValueError(f"{_DATA_FILE}: {name!r} names two boards")
    for table in {b.table for b in boards}:  # a GPU model names its boards, e.g. A100-40GB
        group = tuple(b for b in boards if b.table == table)
        for key in _keys(table):
            index.setdefault(key, group)
    return boards, index


def _keys(name: str) -> tuple[str, ...]:
    key = _SUFFIX.sub("", name.strip()).upper().replace(" ", "-").replace("_", "-")
    bare = key.removeprefix("NVIDIA-").removeprefix("TESLA-")
    return (key, bare) if bare != key else (key,)


def boards() -> tuple[Board, ...]:
    """Every board in catalog order."""
    return _load()[0]


def resolve(name: str) -> tuple[Board, ...]:
    """The boards a board id, alias, GFD product label or GPU model id names (one, or the
    boards of one GPU model). Raises UnknownBoardError listing the known boards."""
    index = _load()[1]
    for key in _keys(name):
        if key in index:
            return index[key]
    known = ", ".join(b.id for b in boards())
    raise UnknownBoardError(
        f"no vGPU board {name!r}: known boards are {known} (GPU Feature Discovery product "
        "labels such as NVIDIA-A100-PCIE-40GB and models such as A100-40GB work too)"
    )
