"""A vGPU pool's node targets and the vGPU Device Manager config Tessera writes for them.

The rendered documents are checked with ``vgpu_parser``, a stand-in for the device manager's
own parser written from its messages (docs/facts/vgpu.md §The config file), not from Tessera's
renderer.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from vgpu_parser import parse

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.cluster import pools
from tessera.domain.geometry import vgpu

A100_NODE = {
    c.GPU_PRODUCT_LABEL: "NVIDIA-A100-PCIE-40GB",
    c.GPU_COUNT_LABEL: "4",
    c.GPU_WORKLOAD_CONFIG_LABEL: "vm-vgpu",
}


def spec(*layouts: dict[str, Any]) -> NodePoolGeometrySpec:
    return NodePoolGeometrySpec.model_validate(
        {"nodeSelector": {"matchLabels": {"pool": "vms"}}, "vgpu": {"layouts": list(layouts)}}
    )


def test_a_vgpu_node_is_handed_to_the_device_manager_and_verified_by_the_sandbox_plugin() -> None:
    target = pools.target_for("vms", spec({"types": {"A100-20C": 2}}), A100_NODE, {})
    desired = target.desired
    assert not desired.invalid
    assert desired.labels == {c.VGPU_CONFIG_LABEL: desired.target}
    assert desired.watch_label == c.VGPU_CONFIG_STATE_LABEL
    assert desired.target.startswith("tessera-vms-")
    assert desired.expected_allocatable == {"nvidia.com/NVIDIA_A100-20C": 8}
    assert target.capacity == {"nvidia.com/NVIDIA_A100-20C": 8}
    assert target.config == (desired.target, [{"devices": "all", "vgpu-devices": {"A100-20C": 2}}])


def test_types_the_node_advertises_now_must_go_and_grid_names_are_kept() -> None:
    now = {"nvidia.com/GRID_A100-10C": 16, "cpu": 64}
    target = pools.target_for("vms", spec({"types": {"A100-20C": 2}}), A100_NODE, now)
    assert target.desired.expected_allocatable == {
        "nvidia.com/GRID_A100-10C": 0,
        "nvidia.com/GRID_A100-20C": 8,
    }


@pytest.mark.parametrize(
    ("labels", "words"),
    [
        ({}, ["A100-20C x3", "A100-PCIE-40GB", "count <= the type's maximum"]),
        ({c.GPU_PRODUCT_LABEL: "NVIDIA-A100-SXM4-40GB"}, ["A100-20C", "A100X-*"]),
        ({c.GPU_PRODUCT_LABEL: "NVIDIA-T4"}, ["no vGPU board 'NVIDIA-T4'"]),
        ({c.GPU_WORKLOAD_CONFIG_LABEL: "container"}, ["gpu.workload.config is container"]),
        ({c.GPU_COUNT_LABEL: ""}, ["no nvidia.com/gpu.count label", "does not run on vm-vgpu"]),
        ({c.GPU_PRODUCT_LABEL: ""}, ["no nvidia.com/gpu.product label", "label the node"]),
    ],
)
def test_a_node_that_cannot_take_the_layout_is_invalid_with_the_reason(
    labels: dict[str, str], words: list[str]
) -> None:
    target = pools.target_for("vms", spec({"types": {"A100-20C": 3}}), A100_NODE | labels, {})
    assert target.config is None
    for word in words:
        assert word in target.desired.invalid


def test_a_node_without_a_workload_label_runs_the_operators_default_container_workload() -> None:
    """The GPU Operator's default workload is ``container``: no vGPU Device Manager there."""
    labels = {k: v for k, v in A100_NODE.items() if k != c.GPU_WORKLOAD_CONFIG_LABEL}
    target = pools.target_for("vms", spec({"types": {"A100-20C": 2}}), labels, {})
    assert target.config is None
    for word in (c.GPU_WORKLOAD_CONFIG_LABEL, "unset (container)", "only on vm-vgpu nodes"):
        assert word in target.desired.invalid


def _document(existing: str, *layout_sets: list[dict[str, Any]]) -> str:
    wanted = {}
    for layouts in layout_sets:
        target = pools.target_for("vms", spec(*layouts), A100_NODE, {})
        assert target.config is not None, target.desired.invalid
        wanted[target.config[0]] = target.config[1]
    text = pools.configs_document(existing, "vms", vgpu.SECTION, wanted, ())
    assert text is not None
    return text


LAYOUT_SETS = [
    [{"types": {"A100-20C": 2}}],
    [{"types": {"A100-4C": 10}}, {"devices": "2-3", "types": {"A100-40C": 1}}],
    [{"devices": "0", "types": {"A100-1-5C": 6, "A100-1-5CME": 1}}],
    [{"types": {"A100-3-20C": 1, "A100-2-10C": 1, "A100-1-10C": 1}}],
]


@pytest.mark.parametrize("layouts", LAYOUT_SETS)
def test_rendered_configs_pass_the_device_managers_parser(layouts: list[dict[str, Any]]) -> None:
    text = _document("", layouts)
    assert parse(text) is None
    doc = yaml.safe_load(text)
    assert set(doc) == {"version", "vgpu-configs"}
    (entries,) = doc["vgpu-configs"].values()
    assert all(set(e) == {"devices", "vgpu-devices"} for e in entries)


def test_human_configs_are_kept_and_the_whole_file_still_parses() -> None:
    human = yaml.safe_dump(
        {
            "version": "v1",
            "vgpu-configs": {
                "default": [{"devices": "all", "vgpu-devices": {"A100-20C": 2}}],
                "A100-1-5C": [
                    {
                        "device-filter": "0x20F110DE",
                        "devices": "all",
                        "vgpu-devices": {"A100-1-5C": 7},
                    }
                ],
            },
        }
    )
    text = _document(human, *LAYOUT_SETS)
    configs = yaml.safe_load(text)["vgpu-configs"]
    assert set(configs) >= {"default", "A100-1-5C"} and len(configs) == 2 + len(LAYOUT_SETS)
    assert configs["A100-1-5C"][0]["device-filter"] == "0x20F110DE"
    assert parse(text) is None
    again = pools.configs_document(text, "vms", vgpu.SECTION, {}, ())
    assert again is not None and set(yaml.safe_load(again)["vgpu-configs"]) == {
        "default",
        "A100-1-5C",
    }


def test_an_invalid_pool_writes_no_document_at_all() -> None:
    """Nothing to hold and nothing there: an empty ``vgpu-configs`` would fail the parser."""
    assert pools.configs_document("", "vms", vgpu.SECTION, {}, ()) is None


# The stand-in parser refuses what the device manager refuses (so the checks above can fail).
BROKEN = [
    (
        "version: v2\nvgpu-configs: {a: [{devices: all, vgpu-devices: {A100-20C: 1}}]}",
        "unknown version",
    ),
    ("vgpu-configs: {a: [{devices: all, vgpu-devices: {A100-20C: 1}}]}", "missing 'version'"),
    ("version: v1\nmig-configs: {}", "unexpected field: mig-configs"),
    ("version: v1\nvgpu-configs: {}", "at least one entry in 'vgpu-configs'"),
    ("version: v1\nvgpu-configs: {a: []}", "at least one entry in 'a'"),
    ("version: v1\nvgpu-configs: {a: [{devices: all}]}", "missing required field: vgpu-devices"),
    ("version: v1\nvgpu-configs: {a: [{vgpu-devices: {}}]}", "missing required field: devices"),
    (
        "version: v1\nvgpu-configs: {a: [{devices: some, vgpu-devices: {A100-20C: 1}}]}",
        "invalid string input for 'devices'",
    ),
    (
        "version: v1\nvgpu-configs: {a: [{devices: all, vgpu-devices: {A100-20C: 1}, x: 1}]}",
        "unexpected field: x",
    ),
    (
        "version: v1\nvgpu-configs: {a: [{devices: all, vgpu-devices: {A100-20X: 1}}]}",
        "malformed vGPU type string",
    ),
    (
        "version: v1\nvgpu-configs: {a: [{devices: all, vgpu-devices: {A100-20C: 0}}]}",
        "invalid count",
    ),
    (
        "version: v1\nvgpu-configs: {a: [{devices: all, vgpu-devices: {A100-20C: 1, A100-1-5C: 1}}]}",
        "cannot mix time-sliced and MIG-backed",
    ),
]


@pytest.mark.parametrize(("text", "message"), BROKEN)
def test_the_stand_in_parser_refuses_what_the_device_manager_refuses(
    text: str, message: str
) -> None:
    problem = parse(text)
    assert problem is not None and message in problem
