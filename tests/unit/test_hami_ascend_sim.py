"""The simulated HAMi Ascend device plugin: what it publishes for one node config entry."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devcluster import hami_ascend, hami_config
from tessera.api import constants as c
from tessera.domain.sharing import nodes

P310 = hami_ascend.CHIPS["310P3"]
REGISTER = c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX + "Ascend310P"
NPU = "huawei.com/Ascend310P"


@pytest.mark.parametrize(
    ("entry", "soft", "slots"),
    [
        pytest.param(None, "false", 7, id="no-entry-defaults-21527MB-over-3072MB"),
        pytest.param({"name": "n", "filterDevices": {"index": [1]}}, "false", 7, id="no-fields"),
        pytest.param({"name": "n", "hami-vnpu-core": False}, "false", 7, id="templates"),
        pytest.param(
            {"name": "n", "hami-vnpu-core": True, "vDeviceCount": 4}, "true", 4, id="soft"
        ),
        pytest.param({"name": "n", "vDeviceCount": 0}, "false", 7, id="zero-count-defaults"),
        pytest.param({"name": "n", "vDeviceCount": "4"}, "false", 7, id="string-count-ignored"),
        pytest.param({"name": "n", "hami-vnpu-core": "true"}, "false", 7, id="string-bool-ignored"),
    ],
)
def test_registration_publishes_slots_per_card_and_lists_the_cards(
    entry: dict[str, Any] | None, soft: str, slots: int
) -> None:
    annotations, devices = hami_ascend.registration("n", P310, 3, entry)
    assert devices == {NPU: 3 * slots}
    assert annotations[c.HAMI_VNPU_CORE_ANNOTATION] == soft
    cards = json.loads(annotations[REGISTER])
    assert [card.get("index", 0) for card in cards] == [0, 1, 2]  # index 0 is omitted, as in Go
    assert {card["count"] for card in cards} == {slots}
    assert len({card["id"] for card in cards}) == 3
    # the domain reads the cards back, whatever allocatable says
    assert nodes.physical_npus(annotations, NPU, devices[NPU]) == 3


@pytest.mark.parametrize(
    ("data", "names"),
    [
        pytest.param({c.HAMI_ASCEND_CONFIGMAP_KEY: "nodes: [{name: a}, 3, {name: b}]"}, ["a", "b"]),
        pytest.param({c.HAMI_ASCEND_CONFIGMAP_KEY: "nodes: {name: a}"}, [], id="not-a-list"),
        pytest.param({c.HAMI_ASCEND_CONFIGMAP_KEY: "nodes: [unclosed"}, [], id="broken-yaml"),
        pytest.param({}, [], id="no-key"),
    ],
)
def test_node_entries(data: dict[str, str], names: list[str]) -> None:
    entries = hami_ascend.node_entries({"data": data})
    assert [e["name"] for e in entries] == names


LIST_FORM = """\
vnpus:
- {chipName: 310P3, commonWord: Ascend310P, memoryAllocatable: 21527, aiCore: 8,
   templates: [{name: vir01, memory: 3072}, {name: vir04, memory: 12288}]}
"""
WRAPPER = """\
vnpus:
  hamiVnpuCore: {core}
  configs:
  - {{chipName: 310P3, commonWord: Ascend310P, memoryAllocatable: 21527, aiCore: 8,
     templates: [{{name: vir02, memory: 6144}}]}}
"""


def _map(text: str) -> dict[str, Any]:
    return {"data": {"device-config.yaml": text}}


@pytest.mark.parametrize(
    ("text", "entry", "soft", "slots"),
    [
        pytest.param(LIST_FORM, None, "false", 7, id="list-form-has-no-global-soft"),
        pytest.param(WRAPPER.format(core="true"), None, "true", 3, id="global-soft-on"),
        pytest.param(WRAPPER.format(core="false"), None, "false", 3, id="global-soft-off"),
        pytest.param(
            WRAPPER.format(core="true"),
            {"name": "n", "hami-vnpu-core": False},
            "false",
            3,
            id="node-entry-turns-it-off",
        ),
        pytest.param(
            LIST_FORM,
            {"name": "n", "hami-vnpu-core": True, "vDeviceCount": 5},
            "true",
            5,
            id="node-entry-turns-it-on",
        ),
    ],
)
def test_the_global_hami_vnpu_core_and_the_node_override(
    text: str, entry: dict[str, Any] | None, soft: str, slots: int
) -> None:
    config = hami_ascend.vnpus(_map(text))
    chip = config.chips["310P3"]
    annotations, devices = hami_ascend.registration("n", chip, 2, entry, config.hami_vnpu_core)
    assert annotations[c.HAMI_VNPU_CORE_ANNOTATION] == soft
    assert devices == {NPU: 2 * slots}
    devcore = {card["devcore"] for card in json.loads(annotations[REGISTER])}
    assert devcore == ({100} if soft == "true" else {8})


def test_without_the_map_the_chart_values_apply_and_a_broken_map_is_an_error() -> None:
    assert hami_ascend.vnpus(None).chips["310P3"] == P310
    assert hami_ascend.vnpus(None).hami_vnpu_core is False
    with pytest.raises(hami_config.ConfigError, match="vnpus"):
        hami_ascend.vnpus(_map("vnpus: {hamiVnpuCore: yes-please, configs: []}"))
    with pytest.raises(hami_config.ConfigError):
        hami_ascend.vnpus(_map("vnpus: [unclosed"))
