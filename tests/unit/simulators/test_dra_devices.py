"""The simulated NVIDIA DRA driver's device table (devcluster/dradevices.py, dra_gpus.yaml).

Names, attributes and capacities as the GPU kubelet plugin v0.4.x publishes them (dra.md §5.2,
§5.3): what Tessera's DeviceClass selectors and slice verification are tested against.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from devcluster import dradevices, dradriver, hardware, migmanager
from tessera.api.v1alpha1.nodepoolgeometry import DraKubeletPlugin

CANONICAL = re.compile(r"^gpu-(\d+)-mig-(.+)-(\d+)-(\d+)$")  # the driver's parser (mig.go)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")


@pytest.mark.parametrize(
    ("profile", "gi", "start", "name"),
    [
        ("1g.10gb", 19, 0, "gpu-0-mig-1g10gb-19-0"),  # dra.md §5.2's example
        ("1g.24gb", 19, 0, "gpu-0-mig-1g24gb-19-0"),
        ("1g.10gb+me", 20, 3, "gpu-0-mig-1g10gb-me-20-3"),
        ("1g.24gb+me.all", 65, 6, "gpu-0-mig-1g24gb-meall-65-6"),
        ("2g.48gb-me", 66, 0, "gpu-0-mig-2g48gb-me-66-0"),
        ("7g.141gb", 0, 0, "gpu-0-mig-7g141gb-0-0"),
    ],
)
def test_mig_device_names_follow_the_driver(profile: str, gi: int, start: int, name: str) -> None:
    assert dradevices.mig_device_name(0, profile, gi, start) == name


@pytest.mark.parametrize(
    ("model", "profile", "gi"),
    [
        ("H100-80GB", "1g.10gb", 19),
        ("H100-80GB", "1g.20gb", 15),
        ("A100-40GB", "1g.10gb", 15),  # 1 compute + 2 memory slices on the 40GB part
        ("A30-24GB", "1g.6gb", 14),  # profile IDs are per model (mig_geometry.md §0.4)
        ("A30-24GB", "4g.24gb", 0),
        ("RTXPRO6000-96GB", "1g.24gb+gfx", 47),
    ],
)
def test_gi_profile_ids_are_per_model(model: str, profile: str, gi: int) -> None:
    info = dradevices.dra_gpu(hardware.gpu(model))
    assert info.profiles[profile].gi_profile_id == gi


@pytest.mark.parametrize("gpu", hardware.gpu_models(), ids=lambda g: g.model)
def test_every_model_of_the_placement_table_has_a_dra_row(gpu: hardware.Gpu) -> None:
    info = dradevices.dra_gpu(gpu)
    assert set(info.profiles) == set(gpu.profiles)
    assert SEMVER.match(info.compute)
    for name, row in info.profiles.items():
        assert 0 < row.memory_mib < info.memory_mib, name
        assert row.multiprocessors > 0, name


def _biggest(gpu: hardware.Gpu) -> str:
    return max(gpu.profiles, key=lambda p: (gpu.profiles[p].size, p))


@pytest.mark.parametrize("gpu", hardware.gpu_models(), ids=lambda g: g.model)
def test_every_device_fits_the_api_limits(gpu: hardware.Gpu) -> None:
    small = min(gpu.profiles, key=lambda p: (gpu.profiles[p].size, p))
    layouts: list[dict[str, int] | None] = [
        {_biggest(gpu): 1},
        {small: gpu.profiles[small].max},
        None,
        *[{small: gpu.profiles[small].max}] * 5,
    ]
    found = dradevices.devices("node-with-a-rather-long-name-0", gpu, layouts)
    assert len(found) <= 128  # ResourceSliceMaxDevices
    for device in found:
        assert DNS_LABEL.match(device["name"]), device["name"]
        assert len(device["attributes"]) + len(device["capacity"]) <= 32, device["name"]
        for name, value in device["attributes"].items():
            (kind, raw), *rest = value.items()
            assert not rest and kind in ("string", "version", "int", "bool"), name
            assert kind != "version" or SEMVER.match(raw), (name, raw)
            assert kind != "string" or len(raw) <= 64, (name, raw)
        if device["attributes"]["type"]["string"] == "mig":
            assert CANONICAL.match(device["name"]), device["name"]


def _by_name(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in found}


def test_mig_off_is_one_whole_gpu_and_mig_on_only_the_instances_that_exist() -> None:
    gpu = hardware.gpu("A100-40GB")
    layout = {"3g.20gb": 1, "1g.5gb": 2, "2g.10gb": 0}
    found = _by_name(dradevices.devices("n1", gpu, [None, layout, {}]))
    # GPU 2 has MIG on and no instance: stranded, nothing announced (dra.md §5.5)
    assert sorted(found) == [
        "gpu-0",
        "gpu-1-mig-1g5gb-19-4",
        "gpu-1-mig-1g5gb-19-5",
        "gpu-1-mig-3g20gb-9-0",
    ]
    whole = found["gpu-0"]
    assert whole["attributes"]["type"] == {"string": "gpu"}
    assert "profile" not in whole["attributes"] and "parentUUID" not in whole["attributes"]
    assert whole["capacity"] == {"memory": {"value": "40960Mi"}}
    mig = found["gpu-1-mig-3g20gb-9-0"]
    attrs = mig["attributes"]
    assert attrs["type"] == {"string": "mig"} and attrs["profile"] == {"string": "3g.20gb"}
    assert attrs["productName"] == {"string": "NVIDIA A100-SXM4-40GB"}
    assert attrs["uuid"]["string"].startswith("MIG-")
    parent = dradevices.gpu_device("n1", dradevices.dra_gpu(gpu), 1)["attributes"]["uuid"]
    assert attrs["parentUUID"] == parent  # the GPU it was carved from
    assert mig["capacity"]["memory"] == {"value": f"{round(19.5 * 1024)}Mi"}
    assert mig["capacity"]["multiprocessors"] == {"value": "42"}
    slices = sorted(k for k in mig["capacity"] if k.startswith("memorySlice"))
    assert slices == ["memorySlice0", "memorySlice1", "memorySlice2", "memorySlice3"]


def test_uuids_are_stable_per_node_and_distinct_across_nodes() -> None:
    gpu = hardware.gpu("H100-80GB")
    first = dradevices.devices("a", gpu, [{"1g.10gb": 7}])
    again = dradevices.devices("a", gpu, [{"1g.10gb": 7}])
    other = dradevices.devices("b", gpu, [{"1g.10gb": 7}])
    uuids = [d["attributes"]["uuid"]["string"] for d in first]
    assert uuids == [d["attributes"]["uuid"]["string"] for d in again]
    assert len(set(uuids)) == 7
    assert not set(uuids) & {d["attributes"]["uuid"]["string"] for d in other}


def test_a_layout_the_gpu_cannot_hold_is_an_error_not_a_guess() -> None:
    with pytest.raises(migmanager.MigError, match="GPU 0"):
        dradevices.devices("n", hardware.gpu("A100-40GB"), [{"4g.20gb": 2}])


def test_later_mig_parted_entries_win_per_gpu() -> None:
    entries = [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [1], "mig-enabled": False},
    ]
    assert migmanager.layouts(3, entries) == [{"1g.10gb": 7}, None, {"1g.10gb": 7}]


def test_the_plugin_daemonset_runs_on_dra_nodes_under_the_pool_defaults() -> None:
    ds = dradriver.daemonset()
    meta = ds["metadata"]
    defaults = DraKubeletPlugin()  # spec.dra.kubeletPlugin of a NodePoolGeometry
    assert (meta["namespace"], meta["name"]) == (defaults.namespace, defaults.daemon_set)
    assert meta["name"] == "nvidia-dra-driver-gpu-kubelet-plugin"
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.deploy.dra-driver": "true"}
    assert dradriver.slice_name("gpu-1") == "gpu-1-gpu.nvidia.com"
