"""The GPU node agent's device mapping: ``nvidia-smi -L`` and device-plugin IDs -> GPU indices."""

from __future__ import annotations

import pytest

from tessera.domain.geometry import nvidiasmi

G0 = "GPU-5f1c0d9e-3e5a-4b17-9c2e-5da9abb51763"
G1 = "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4"
M0 = "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde"
M1 = "MIG-56c30729-347f-5dd6-8da0-c3cc59e969e0"

LISTING = f"""\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: {G0})
GPU 1: NVIDIA H100 80GB HBM3 (UUID: {G1})
  MIG 3g.40gb     Device  0: (UUID: {M0})
  MIG 1g.10gb     Device  1: (UUID: {M1})
"""
DEVICES = nvidiasmi.parse_list(LISTING)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (LISTING, {G0: 0, "0": 0, G1: 1, "1": 1, M0: 1, "1:0": 1, M1: 1, "1:1": 1}),
        ("", {}),
        # R450-era MIG UUIDs name the parent GPU and the instance: still one device of GPU 0.
        (
            f"GPU 0: A100-SXM4-40GB (UUID: {G0})\n  MIG 1g.5gb Device 0: (UUID: MIG-{G0}/7/0)\n",
            {G0: 0, "0": 0, f"MIG-{G0}/7/0": 0, "0:0": 0},
        ),
        # Warnings, blank lines, Windows line ends: only GPU and MIG lines count.
        (
            f"Failed to initialize NVML: Unknown Error\r\n\r\nGPU 3: Tesla T4 (UUID: {G1})\r\n",
            {G1: 3, "3": 3},
        ),
        (f"  MIG 1g.10gb     Device  0: (UUID: {M0})\n", {}),  # names no GPU
    ],
    ids=["h100-mixed", "empty", "old-mig-uuid", "noise", "orphan-mig"],
)
def test_parse_list(text: str, want: dict[str, int]) -> None:
    assert nvidiasmi.parse_list(text) == want


@pytest.mark.parametrize(
    ("device_id", "want"),
    [
        (G0, 0),
        (M1, 1),
        (f"{G0}::3", 0),  # a time-slicing / MPS replica of GPU 0
        (f"{M0}::0", 1),  # a replica of a MIG device
        ("1", 1),  # deviceIDStrategy index
        ("1:0", 1),
        ("1:0::2", 1),
        ("7", None),  # no such GPU
        ("1:5", None),  # no such MIG device
        ("GPU-unknown", None),
        (f"{G0}::x", None),  # not a replica suffix
        ("", None),
    ],
)
def test_gpu_of(device_id: str, want: int | None) -> None:
    assert nvidiasmi.gpu_of(device_id, DEVICES) == want


@pytest.mark.parametrize(
    ("held", "pods", "unmapped"),
    [
        ([], {}, set()),
        (
            [("a/x", "nvidia.com/gpu", G0), ("a/x", "nvidia.com/gpu", G1)],
            {"a/x": {0, 1}},
            set(),
        ),
        (
            [
                ("a/x", "nvidia.com/mig-3g.40gb", M0),
                ("a/y", "nvidia.com/mig-1g.10gb", f"{M1}::1"),
                ("a/z", "nvidia.com/gpu.shared", f"{G0}::0"),
            ],
            {"a/x": {1}, "a/y": {1}, "a/z": {0}},
            set(),
        ),
        # Devices of other vendors do not count, whatever their IDs.
        ([("a/x", "example.com/fpga", "0"), ("a/y", "huawei.com/Ascend910", "x")], {}, set()),
        # One unknown ID makes the whole pod unmapped; its known GPUs are not listed.
        (
            [("a/x", "nvidia.com/gpu", G0), ("a/x", "nvidia.com/gpu", "GPU-gone")],
            {},
            {"a/x"},
        ),
        (
            [("a/x", "nvidia.com/gpu", "GPU-gone"), ("a/y", "nvidia.com/gpu", G1)],
            {"a/y": {1}},
            {"a/x"},
        ),
    ],
    ids=["none", "whole-gpus", "mig-and-replicas", "other-vendors", "one-unknown", "mixed"],
)
def test_holders(
    held: list[tuple[str, str, str]], pods: dict[str, set[int]], unmapped: set[str]
) -> None:
    assert nvidiasmi.holders(held, DEVICES) == (pods, unmapped)
