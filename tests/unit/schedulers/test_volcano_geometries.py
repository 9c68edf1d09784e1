"""The map KnownGeometriesCM* points at: the shape and keys the Volcano version reads."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tessera.domain.schedulers import traps
from tessera.domain.schedulers.versions import Version
from tessera.domain.schedulers.volcano import geometries as g

HAMI_310P3: dict[str, Any] = {  # HAMi v2.10 chart values (hami_ascend.md §1.5, §1.6)
    "chipName": "310P3",
    "commonWord": "Ascend310P",
    "resourceName": "huawei.com/Ascend310P",
    "resourceMemoryName": "huawei.com/Ascend310P-memory",
    "resourceCoreName": "huawei.com/Ascend310P-core",
    "memoryAllocatable": 21527,
    "memoryCapacity": 24576,
    "memoryFactor": 1,
    "aiCore": 8,
    "aiCPU": 7,
    "runtimeClassName": "",
    "overwriteEnv": False,
    "templates": [
        {"name": "vir01", "memory": 3072, "aiCore": 1, "aiCPU": 1},
        {"name": "vir02", "memory": 6144, "aiCore": 2, "aiCPU": 2},
    ],
}
VOLCANO_310P3 = {
    k: HAMI_310P3[k]
    for k in (
        "chipName",
        "commonWord",
        "resourceName",
        "resourceMemoryName",
        "memoryAllocatable",
        "memoryCapacity",
        "aiCore",
        "aiCPU",
        "templates",
    )
}


@pytest.mark.parametrize(
    ("version", "vnpus"),
    [
        (Version(1, 14, 0), [VOLCANO_310P3]),
        (Version(1, 15, 3), [VOLCANO_310P3]),
        (Version(1, 16, 0), {"hamiVnpuCore": True, "configs": [VOLCANO_310P3]}),
        (Version(1, 17, 0), {"hamiVnpuCore": True, "configs": [VOLCANO_310P3]}),
    ],
)
def test_vnpus_shape_follows_the_volcano_version(version: Version, vnpus: Any) -> None:
    doc = g.document(version, [HAMI_310P3], hami_vnpu_core=True)
    assert doc == {"vnpus": vnpus}
    assert yaml.safe_load(g.render(doc)) == doc
    assert traps.map_form_too_new(version, doc["vnpus"], "x") is None  # never a trap we write


def test_keys_volcano_ignores_are_left_out() -> None:
    chip = g.volcano_chip({**HAMI_310P3, "superPod": True, "runtimeClassName": "ascend"})
    assert set(chip) == set(g.VOLCANO_VNPU_KEYS)


def test_nvidia_and_vnpus_merge_into_one_file_with_volcano_keys() -> None:
    doc = g.document(
        Version(1, 16, 0), [HAMI_310P3], nvidia={"deviceSplitCount": 4, "memoryFactor": 2}
    )
    assert list(doc) == ["nvidia", "vnpus"]
    assert doc["nvidia"]["deviceSplitCount"] == 4
    assert doc["nvidia"]["gpuMemoryFactor"] == 2 and "memoryFactor" not in doc["nvidia"]
    assert doc["nvidia"]["resourceCountName"] == "volcano.sh/vgpu-number"
    assert set(doc["nvidia"]) <= set(g.VOLCANO_NVIDIA_KEYS)


def test_configmap_is_tessera_s_and_holds_device_config_yaml() -> None:
    cm = g.configmap("volcano-system", g.document(Version(1, 16, 0), [HAMI_310P3]))
    assert cm["metadata"] == {
        "name": "tessera-volcano-device-config",
        "namespace": "volcano-system",
        "labels": {"app.kubernetes.io/managed-by": "tessera"},
    }
    assert (
        yaml.safe_load(cm["data"]["device-config.yaml"])["vnpus"]["configs"][0]["chipName"]
        == "310P3"
    )
