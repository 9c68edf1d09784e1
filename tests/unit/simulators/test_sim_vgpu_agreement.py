"""The simulated vGPU host's board table and Tessera's vGPU catalog agree — two independent
sources (devcluster/vgpu_boards.yaml, operator/tessera/domain/geometry/vgpu_catalog.yaml), so a slip in
either shows here instead of being copied into the other."""

from __future__ import annotations

import itertools

import pytest

from devcluster import vgpuboards, vgpumanager
from devcluster.vgpuconfig import Spec
from tessera.domain.geometry import vgpu, vgpu_catalog

BOARDS = vgpuboards.boards()


def theirs(board: vgpuboards.Board) -> vgpu_catalog.Board:
    (found,) = vgpu_catalog.resolve(board.product)
    return found


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b.key)
def test_the_board_is_the_same_board(board: vgpuboards.Board) -> None:
    other = theirs(board)
    assert other.prefix == board.prefix
    assert {int(i, 16) for i in other.pci_device_ids} == {int(i, 16) for i in board.pci}
    assert other.time_sliced == dict(board.time_sliced)
    assert other.mig_backed == dict(board.mig_backed)


def layouts(board: vgpuboards.Board) -> list[dict[str, int]]:
    """Every type at its maximum and one above; every pair of types at one each and at max."""
    names = [f"{board.prefix}-{t}" for t in (*board.time_sliced, *board.mig_backed)]
    out = [{n: board.max_of(n) or 0} for n in names] + [
        {n: (board.max_of(n) or 0) + 1} for n in names
    ]
    for a, b in itertools.combinations(names, 2):
        out += [{a: 1, b: 1}, {a: board.max_of(a) or 0, b: 1}]
    return out


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b.key)
def test_the_simulator_creates_exactly_what_tessera_accepts(board: vgpuboards.Board) -> None:
    other = theirs(board)
    disagree = []
    for layout in layouts(board):
        mixed = len({vgpu_catalog.parse_type(t).mig_backed for t in layout}) > 1
        if mixed:
            continue  # refused by the device manager's parser before the node is asked
        _, error = vgpumanager.apply(board, [{}], [Spec((), "all", layout)])
        reason = vgpu.check_gpu(other, layout)
        if (error is None) != (reason is None):
            disagree.append((layout, error, reason))
    assert not disagree, disagree[:5]
