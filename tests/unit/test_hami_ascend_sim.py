"""The simulated HAMi Ascend device plugin: what it publishes for one node config entry."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devcluster import hami_ascend
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
