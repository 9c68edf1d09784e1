"""In place vs disruptive, with the reason a person reads."""

from __future__ import annotations

import pytest

from tessera.domain.sharing import changes
from tessera.domain.sharing.device_plugin import DevicePluginConfig, Replicated

GPU = "nvidia.com/gpu"
EXCL = changes.of_device_plugin(DevicePluginConfig())
TS4 = changes.of_device_plugin(
    DevicePluginConfig("time-slicing", (Replicated(GPU, 4),), False, True)
)
TS8 = changes.of_device_plugin(
    DevicePluginConfig("time-slicing", (Replicated(GPU, 8),), False, True)
)
TS8R = changes.of_device_plugin(
    DevicePluginConfig("time-slicing", (Replicated(GPU, 8),), True, True)
)
MPS4 = changes.of_device_plugin(DevicePluginConfig("mps", (Replicated(GPU, 4),), False, True, "/r"))
MPS8 = changes.of_device_plugin(DevicePluginConfig("mps", (Replicated(GPU, 8),), False, True, "/r"))
CORE = changes.of_hami({"operatingmode": "hami-core", "devicesplitcount": 10})
CORE4 = changes.of_hami({"operatingmode": "hami-core", "devicesplitcount": 4})
MIG = changes.of_hami({"operatingmode": "mig"})
SOFT = changes.with_ascend(EXCL, {"hami-vnpu-core": True, "vDeviceCount": 7})
SOFT4 = changes.with_ascend(EXCL, {"hami-vnpu-core": True, "vDeviceCount": 4})
HARD = changes.with_ascend(EXCL, {"hami-vnpu-core": False})


@pytest.mark.parametrize(
    ("old", "new", "kind", "reason"),
    [
        pytest.param(TS4, TS4, "none", "unchanged on node n1", id="same"),
        pytest.param(
            TS4,
            TS8,
            "in-place",
            "nvidia.com/gpu replicas 4 -> 8 on node n1: the device plugin re-advertises, pods keep devices",
            id="raise-replicas",
        ),
        pytest.param(
            TS8,
            TS4,
            "in-place",
            "nvidia.com/gpu replicas 8 -> 4 on node n1: the device plugin re-advertises, pods keep devices",
            id="lower-replicas",
        ),
        pytest.param(
            TS8,
            TS8R,
            "in-place",
            "renameByDefault False -> True on node n1: the device plugin re-advertises, pods keep devices",
            id="rename",
        ),
        pytest.param(
            EXCL,
            TS4,
            "in-place",
            "backend exclusive -> time-slicing on node n1: the plugin re-advertises, pods keep devices",
            id="exclusive-to-ts",
        ),
        pytest.param(
            MPS4,
            TS4,
            "disruptive",
            "backend mps -> time-slicing on node n1: MPS changes the GPU compute mode and the daemon serving running pods",
            id="mps-to-ts",
        ),
        pytest.param(
            EXCL,
            MPS4,
            "disruptive",
            "backend exclusive -> mps on node n1: MPS changes the GPU compute mode and the daemon serving running pods",
            id="exclusive-to-mps",
        ),
        pytest.param(
            MPS4,
            MPS8,
            "disruptive",
            "nvidia.com/gpu replicas 4 -> 8 on node n1: the MPS control daemon restarts to apply it and waits for clients to exit",
            id="mps-replicas",
        ),
        pytest.param(
            CORE,
            MIG,
            "disruptive",
            "backend hami-core -> hami-mig on node n1: HAMi's MIG mode creates MIG instances and resets idle GPUs",
            id="hami-core-to-mig",
        ),
        pytest.param(
            MIG,
            CORE,
            "disruptive",
            "backend hami-mig -> hami-core on node n1: HAMi's MIG mode creates MIG instances and resets idle GPUs",
            id="hami-mig-to-core",
        ),
        pytest.param(
            CORE,
            CORE4,
            "in-place",
            "devicesplitcount 10 -> 4 on node n1: HAMi's device plugin rereads its node config",
            id="hami-split",
        ),
        pytest.param(
            TS4,
            CORE,
            "disruptive",
            "backend time-slicing -> hami-core on node n1: a different device plugin takes over the GPUs of running pods",
            id="nvidia-to-hami",
        ),
        pytest.param(
            SOFT,
            SOFT4,
            "in-place",
            "vDeviceCount 7 -> 4 on node n1: the device plugin re-advertises, pods keep devices",
            id="ascend-slots",
        ),
        pytest.param(
            SOFT,
            HARD,
            "disruptive",
            "Ascend hami-vnpu-core soft slicing -> template slicing on node n1: running vNPUs were allocated the other way",
            id="ascend-soft-to-hard",
        ),
        pytest.param(None, TS4, "in-place", "first sharing config on node n1", id="unknown-before"),
    ],
)
def test_classification(
    old: changes.Effective | None, new: changes.Effective, kind: str, reason: str
) -> None:
    got = changes.classify(old, new, "n1")
    assert (got.kind, got.reason) == (kind, reason)
    assert got.disruptive is (kind == "disruptive")
