"""The vGPU catalog and its rules: boards, type names, maxima, homogeneity, MIG-backed placement."""

from __future__ import annotations

import pytest

from tessera.api.v1alpha1.vgpu import VgpuLayout
from tessera.domain.geometry import catalog, vgpu, vgpu_catalog
from tessera.domain.geometry.layouts import GeometryError

A100_PCIE = vgpu_catalog.resolve("NVIDIA-A100-PCIE-40GB")[0]
L40S = vgpu_catalog.resolve("NVIDIA-L40S")[0]


@pytest.mark.parametrize(
    ("label", "board", "prefix"),
    [
        ("NVIDIA-A100-PCIE-40GB", "A100-PCIE-40GB", "A100"),
        ("NVIDIA-A100-SXM4-40GB", "A100-SXM4-40GB", "A100X"),
        ("NVIDIA-A100-80GB-PCIe", "A100-PCIE-80GB", "A100D"),
        ("NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB", "A100DX"),
        ("NVIDIA-H100-PCIe", "H100-PCIE-80GB", "H100"),
        ("NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB", "H100XM"),
        ("NVIDIA-H100-NVL", "H100-NVL-94GB", "H100L"),
        ("NVIDIA-L40S", "L40S-48GB", "L40S"),
        ("NVIDIA-A30", "A30-24GB", "A30"),
        ("NVIDIA-A10", "A10-24GB", "A10"),
        ("nvidia-a100-pcie-40gb-SHARED", "A100-PCIE-40GB", "A100"),
    ],
)
def test_a_gfd_product_label_names_one_board_and_its_type_prefix(
    label: str, board: str, prefix: str
) -> None:
    (found,) = vgpu_catalog.resolve(label)
    assert (found.id, found.prefix) == (board, prefix)


def test_a_gpu_model_names_every_board_built_on_it() -> None:
    assert [b.id for b in vgpu_catalog.resolve("A100-40GB")] == ["A100-PCIE-40GB", "A100-SXM4-40GB"]
    assert [b.prefix for b in vgpu_catalog.resolve("H100-80GB")] == ["H100", "H100XM"]


def test_an_unknown_board_lists_the_known_ones() -> None:
    with pytest.raises(vgpu_catalog.UnknownBoardError, match="A100-PCIE-40GB, A100-SXM4-40GB"):
        vgpu_catalog.resolve("NVIDIA-T4")


def test_pci_ids_become_device_filters_with_nvidias_vendor_id() -> None:
    assert vgpu_catalog.resolve("NVIDIA-A100-80GB-PCIe")[0].device_filters == (
        "0x20B510DE",
        "0x20B810DE",
    )


@pytest.mark.parametrize("board", vgpu_catalog.boards(), ids=lambda b: b.id)
def test_every_mig_backed_type_is_a_mig_profile_of_the_boards_gpu_with_the_same_limit(
    board: vgpu_catalog.Board,
) -> None:
    if board.mig_model is None:
        assert board.mig_backed == {}
        return
    model = catalog.resolve(board.mig_model)
    for suffix, most in board.mig_backed.items():
        vtype = vgpu_catalog.parse_type(f"{board.prefix}-{suffix}")
        assert vtype is not None and vtype.mig_backed
        profile = model.profile(vtype.mig_profile)
        assert profile is not None, f"{board.id}: {vtype.name} -> {vtype.mig_profile}"
        assert profile.max_instances == most, vtype.name
        assert vgpu.check_gpu(board, {vtype.name: most}) is None


@pytest.mark.parametrize("board", vgpu_catalog.boards(), ids=lambda b: b.id)
def test_every_time_sliced_maximum_fits_the_frame_buffer_and_is_accepted(
    board: vgpu_catalog.Board,
) -> None:
    for suffix, most in board.time_sliced.items():
        size = int(suffix[:-1])
        assert most * size <= board.framebuffer_gb, suffix
        assert vgpu.check_gpu(board, {f"{board.prefix}-{suffix}": most}) is None
        assert vgpu.check_gpu(board, {f"{board.prefix}-{suffix}": most + 1}) is not None


@pytest.mark.parametrize(
    ("name", "prefix", "suffix", "profile"),
    [
        ("A100D-20C", "A100D", "20C", ""),
        ("RTX6000-Ada-24Q", "RTX6000-Ada", "24Q", ""),
        ("A100-1-5C", "A100", "1-5C", "1g.5gb"),
        ("A100-1-5CME", "A100", "1-5CME", "1g.5gb+me"),
        ("A30-2-12CME", "A30", "2-12CME", "2g.12gb+me"),
    ],
)
def test_type_names_parse_as_the_device_manager_reads_them(
    name: str, prefix: str, suffix: str, profile: str
) -> None:
    parsed = vgpu_catalog.parse_type(name)
    assert parsed is not None
    assert (parsed.prefix, parsed.suffix, parsed.mig_profile) == (prefix, suffix, profile)


# Every refusal names the type, the board and the rule.
REFUSED = [
    ({"A100D-20C": 1}, ["A100D-20C", "A100-PCIE-40GB", "the type must exist on the board"]),
    ({"A100-2C": 4}, ["A100-2C", "A100-PCIE-40GB", "the type must exist on the board"]),
    ({"A100-2-5C": 1}, ["A100-2-5C", "A100-PCIE-40GB", "the type must exist on the board"]),
    ({"A100-20C": 3}, ["A100-20C x3", "A100-PCIE-40GB", "count <= the type's maximum", "2"]),
    ({"A100-1-5CME": 2}, ["A100-1-5CME x2", "A100-PCIE-40GB", "count <= the type's maximum"]),
    (
        {"A100-10C": 1, "A100-20C": 1},
        ["A100-10C and A100-20C", "A100-PCIE-40GB", "one time-sliced vGPU type per GPU"],
    ),
    (
        {"A100-20C": 1, "A100-1-5C": 1},
        ["A100-20C with A100-1-5C", "A100-PCIE-40GB", "never share a GPU"],
    ),
    (
        {"A100-3-20C": 2, "A100-1-5C": 1},
        ["3g.20gb x2 + 1g.5gb", "A100-PCIE-40GB", "MIG placement"],
    ),
    ({"a100-20c": 1}, ["a100-20c", "type grammar"]),
]


@pytest.mark.parametrize(("counts", "words"), REFUSED)
def test_a_refused_gpu_layout_names_type_board_and_rule(
    counts: dict[str, int], words: list[str]
) -> None:
    reason = vgpu.check_gpu(A100_PCIE, counts)
    assert reason is not None
    for word in words:
        assert word in reason


@pytest.mark.parametrize(
    "counts",
    [
        {"A100-20C": 2},
        {"A100-4C": 10},
        {"A100-1-5C": 6, "A100-1-5CME": 1},
        {"A100-3-20C": 1, "A100-2-10C": 1, "A100-1-10C": 1},
        {"A100-7-40C": 1},
        {},
    ],
)
def test_accepted_gpu_layouts(counts: dict[str, int]) -> None:
    assert vgpu.check_gpu(A100_PCIE, counts) is None


def test_graphics_boards_take_q_types_and_have_no_mig_backed_ones() -> None:
    assert vgpu.check_gpu(L40S, {"L40S-12Q": 4}) is None
    reason = vgpu.check_gpu(L40S, {"L40S-1-12C": 1})
    assert reason is not None and "MIG-backed types are none" in reason


def test_a_node_verdict_names_the_gpus_and_capacity_sums_them() -> None:
    layouts = [VgpuLayout(types={"A100-20C": 2}), VgpuLayout(devices="3", types={"A100-40C": 1})]
    assert vgpu.vgpu_capacity(A100_PCIE, 4, layouts) == {
        "nvidia.com/NVIDIA_A100-20C": 6,
        "nvidia.com/NVIDIA_A100-40C": 1,
    }
    assert vgpu.vgpu_capacity(A100_PCIE, 4, layouts, vgpu.OLDER) == {
        "nvidia.com/GRID_A100-20C": 6,
        "nvidia.com/GRID_A100-40C": 1,
    }
    bad = [VgpuLayout(types={"A100-20C": 2}), VgpuLayout(devices="1-2", types={"A100-20C": 4})]
    verdict = vgpu.validate_vgpu_node(A100_PCIE, 4, bad)
    assert not verdict.valid and verdict.reason.startswith("GPUs 1-2: A100-20C x4")
    with pytest.raises(GeometryError, match="GPUs 1-2"):
        vgpu.vgpu_capacity(A100_PCIE, 4, bad)


def test_gpus_no_layout_covers_get_no_vgpu() -> None:
    layouts = [VgpuLayout(devices="0", types={"A100-40C": 1})]
    assert vgpu.vgpu_capacity(A100_PCIE, 2, layouts) == {"nvidia.com/NVIDIA_A100-40C": 1}
    entries = vgpu.vgpu_entries(layouts)
    assert entries[0] == {"devices": [0], "vgpu-devices": {"A100-40C": 1}}
    assert entries[1]["vgpu-devices"] == {} and 1 in entries[1]["devices"]


@pytest.mark.parametrize(
    ("allocatable", "prefix"),
    [
        ({}, "NVIDIA"),
        ({"nvidia.com/NVIDIA_A100-20C": 2}, "NVIDIA"),
        ({"nvidia.com/GRID_A100-20C": 2, "cpu": 64}, "GRID"),
        ({"nvidia.com/GRID_A100-20C": 0, "nvidia.com/NVIDIA_A100-20C": 2}, "NVIDIA"),  # stale
        ({"nvidia.com/GRID_A100-20C": 0}, "NVIDIA"),
    ],
)
def test_the_resource_prefix_follows_what_the_node_advertises(
    allocatable: dict[str, int], prefix: str
) -> None:
    assert vgpu.resource_prefix(allocatable) == prefix
