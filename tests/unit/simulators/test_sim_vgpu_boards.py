"""The simulated vGPU host's own board table (devcluster/vgpu_boards.yaml) and its apply.

What the device manager's parser lets through fails here, on the node, as on a real host: a
type the board lacks, a second time-sliced size on a GPU (equal-size mode), a count above the
type's maximum, MIG-backed types that do not sit side by side on the MIG grid. An apply deletes
every vGPU device of each GPU it changes, and a failure leaves the GPU as far as it got.
"""

from __future__ import annotations

import pytest

from devcluster import vgpuboards, vgpumanager
from devcluster.vgpuconfig import Spec

A100D = vgpuboards.board("A100-PCIE-80GB")


def spec(
    types: dict[str, int], devices: str | tuple[int, ...] = "all", filt: tuple[int, ...] = ()
) -> Spec:
    return Spec(filt, devices, types)


@pytest.mark.parametrize(
    ("board", "types"),
    [
        ("A100-PCIE-80GB", {"A100D-20C": 4}),
        ("A100-PCIE-80GB", {"A100D-4C": 20}),
        ("NVIDIA-A100-80GB-PCIe", {"A100D-3-40C": 1, "A100D-2-20C": 1, "A100D-1-10C": 2}),
        ("A100-PCIE-80GB", {"A100D-1-10C": 7}),
        ("A100-SXM4-40GB", {"A100X-10C": 4}),
        ("H100-SXM5-80GB", {"H100XM-5C": 16}),
        ("L40S", {"L40S-1Q": 32}),
        ("A30", {"A30-2-12C": 1, "A30-1-6C": 2}),
    ],
)
def test_layouts_the_board_holds_are_created(board: str, types: dict[str, int]) -> None:
    found = vgpuboards.board(board)
    after, error = vgpumanager.apply(found, [{}], [spec(types)])
    assert error is None and after == [types]
    assert vgpumanager.asserted(found, after, [spec(types)])


@pytest.mark.parametrize(
    ("types", "why"),
    [
        (
            {"A100-20C": 2},
            "vgpu type A100-20C is not supported on GPU (index=0",
        ),  # the PCIe 40GB name
        ({"A100D-1C": 2}, "vgpu type A100D-1C is not supported"),  # no 1C on A100
        (
            {"A100D-20C": 5},
            "failed to create 5 A100D-20C vGPU devices on the GPU. ensure '5' does not exceed",
        ),
        (
            {"A100D-20C": 2, "A100D-10C": 2},
            "failed to create 2 A100D-20C vGPU devices",
        ),  # equal-size
        ({"A100D-3-40C": 2, "A100D-1-10C": 1}, "failed to create 2 A100D-3-40C"),  # the MIG grid
        ({"A100D-1-10CME": 2}, "failed to create 2 A100D-1-10CME"),
    ],
)
def test_what_only_the_node_refuses(types: dict[str, int], why: str) -> None:
    _, error = vgpumanager.apply(A100D, [{}], [spec(types)])
    assert error is not None and why in error, error


def test_an_apply_deletes_every_device_of_a_changed_gpu_and_leaves_the_others() -> None:
    before = [{"A100D-20C": 4}, {"A100D-40C": 2}]
    after, error = vgpumanager.apply(A100D, before, [spec({"A100D-10C": 8}, (1,))])
    assert error is None and after == [{"A100D-20C": 4}, {"A100D-10C": 8}]
    assert not vgpumanager.asserted(A100D, after, [spec({"A100D-10C": 8}, (1,))])  # GPU 0 unmatched
    assert vgpumanager.asserted(
        A100D, after, [spec({"A100D-20C": 4}), spec({"A100D-10C": 8}, (1,))]
    )


def test_a_failed_apply_leaves_the_gpu_as_far_as_it_got() -> None:
    before = [{"A100D-20C": 4}, {"A100D-20C": 4}]
    after, error = vgpumanager.apply(A100D, before, [spec({"A100D-40C": 3})])
    assert error is not None and "failed to create 3 A100D-40C" in error
    assert after == [{"A100D-40C": 2}, {"A100D-20C": 4}]  # GPU 0 wiped, refilled to the max
    after, error = vgpumanager.apply(A100D, before, [spec({"A100D-40C": 2})], fail_on=0)
    assert error is not None and "injected" in error and after == [{}, {"A100D-20C": 4}]


def test_device_filters_pick_boards_by_pci_id() -> None:
    other = spec({"A100D-40C": 2}, filt=(0x233110DE,))  # an H100 PCIe entry: not this board
    after, error = vgpumanager.apply(
        A100D, [{}], [other, spec({"A100D-20C": 4}, filt=(0x20B510DE,))]
    )
    assert error is None and after == [{"A100D-20C": 4}]


def test_the_sandbox_plugin_names_resources_after_the_mdev_type() -> None:
    gpus = [{"A10-12Q": 2}, {"A10-12Q": 2}]
    assert vgpumanager.resources(gpus) == {"nvidia.com/NVIDIA_A10-12Q": 4}
    assert vgpumanager.resources(gpus, "GRID") == {"nvidia.com/GRID_A10-12Q": 4}


def test_every_board_answers_to_its_names_and_unknown_boards_say_so() -> None:
    for board in vgpuboards.boards():
        assert vgpuboards.board(board.product) is board
        assert board.device_id & 0xFFFF == 0x10DE
        assert all(n <= 64 for n in (*board.time_sliced.values(), *board.mig_backed.values()))
    with pytest.raises(vgpuboards.UnknownBoardError, match="no vGPU board 'T4'"):
        vgpuboards.board("T4")
