"""The simulated HAMi NVIDIA device plugin: what it registers for a node under its two configs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devcluster import hami_config, hami_nvidia

A10, A100 = "NVIDIA-A10", "NVIDIA-A100-SXM4-40GB"
CHART = hami_config.NvidiaDefaults()  # deviceSplitCount 10, scalings 1
ALLOW_A100 = hami_config.NvidiaDefaults(
    mig_allowlist=((("A100-SXM4-40GB", "A100-40GB-PCIe"), ("1g.5gb", "2g.10gb", "7g.40gb")),)
)


def config(
    entry: dict[str, Any] | None, defaults: hami_config.NvidiaDefaults = CHART
) -> hami_nvidia.NodeConfig:
    return hami_nvidia.node_config(defaults, [entry] if entry else [], "n")


@pytest.mark.parametrize(
    ("entry", "mode", "split", "memory", "core"),
    [
        pytest.param(None, "hami-core", 10, 23028, 100, id="no-entry-the-nvidia-defaults"),
        pytest.param(
            {"name": "other", "devicesplitcount": 3},
            "hami-core",
            10,
            23028,
            100,
            id="another-node's-entry",
        ),
        pytest.param(
            {
                "name": "n",
                "operatingmode": "hami-core",
                "devicesplitcount": 4,
                "devicememoryscaling": 1.5,
                "devicecorescaling": 0.5,
            },
            "hami-core",
            4,
            34542,
            50,
            id="the-entry-wins",
        ),
        pytest.param(
            {"name": "n", "operatingmode": "mps", "devicesplitcount": 2},
            "hami-core",
            2,
            23028,
            100,
            id="mps-runs-as-hami-core",
        ),
        pytest.param(
            {"name": "n", "devicesplitcount": 0},
            "hami-core",
            10,
            23028,
            100,
            id="zero-is-unset-as-mergo-reads-it",
        ),
    ],
)
def test_hami_core_registers_split_count_slots_per_gpu(
    entry: dict[str, Any] | None, mode: str, split: int, memory: int, core: int
) -> None:
    register, slots = hami_nvidia.registration("n", A10, 4, config(entry), CHART)
    assert slots == 4 * split
    gpus = json.loads(register)
    assert [g["index"] for g in gpus] == [0, 1, 2, 3]
    assert {(g["mode"], g["count"], g["devmem"], g["devcore"]) for g in gpus} == {
        (mode, split, memory, core)
    }
    assert len({g["id"] for g in gpus}) == 4


def test_a_node_config_from_the_map_defaults() -> None:
    doc = hami_config.document(
        {"data": {"device-config.yaml": "nvidia: {deviceSplitCount: 6, deviceCoreScaling: 2}"}}
    )
    defaults = hami_config.nvidia(doc or {})
    assert config(None, defaults) == hami_nvidia.NodeConfig("hami-core", 6, 1.0, 2.0)


@pytest.mark.parametrize(
    ("product", "defaults", "slots"),
    [
        pytest.param(A100, ALLOW_A100, 7, id="largest-instance-count-of-the-allowed-profiles"),
        pytest.param(A100, CHART, 0, id="no-allowlist-nothing-registers"),
        pytest.param(A10, ALLOW_A100, 0, id="a-gpu-without-mig"),
    ],
)
def test_mig_mode_counts_instances_and_ignores_the_scalings(
    product: str, defaults: hami_config.NvidiaDefaults, slots: int
) -> None:
    cfg = config({"name": "n", "operatingmode": "mig", "devicememoryscaling": 3}, defaults)
    register, total = hami_nvidia.registration("n", product, 2, cfg, defaults)
    assert total == 2 * slots
    assert {(g["mode"], g["devcore"]) for g in json.loads(register)} == {("mig", 100)}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{not json", id="not-json"),
        pytest.param('{"nodeconfig": [{"name": "n", "devicesplitcount": "4"}]}', id="string"),
        pytest.param('{"nodeconfig": [{"name": "n", "devicesplitcount": -1}]}', id="negative"),
        pytest.param('{"nodeconfig": [{"name": "n", "devicecorescaling": true}]}', id="bool"),
        pytest.param('{"nodeconfig": {"name": "n"}}', id="not-a-list"),
    ],
)
def test_a_config_json_go_cannot_decode_stops_the_plugin(text: str) -> None:
    with pytest.raises(hami_config.ConfigError):
        hami_nvidia.nodeconfig_entries({"data": {"config.json": text}})


def test_a_broken_nvidia_section_stops_the_plugin() -> None:
    with pytest.raises(hami_config.ConfigError, match="deviceSplitCount"):
        hami_config.nvidia({"nvidia": {"deviceSplitCount": "ten"}})
