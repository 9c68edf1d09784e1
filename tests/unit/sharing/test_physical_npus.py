"""Physical NPUs of a node: HAMi's register annotation when it parses, else allocatable.

HAMi's Ascend device plugin registers ``vDeviceCount`` kubelet devices per card,
so its node's allocatable is cards x slots and says nothing about the cards; its
``hami.io/node-register-<CW>`` annotation lists them, one object each.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sharing_builders import policy

from builders import NodeWrapper
from tessera.api import constants as c
from tessera.domain.cluster import objects as cluster
from tessera.domain.sharing import nodes, rollout_targets
from tessera.domain.sharing.rendering import result_of
from tessera.domain.sharing.status import advertised

NPU = "huawei.com/Ascend310P"
REGISTER = c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX + "Ascend310P"


def _cards(n: int, slots: int = 7) -> str:
    """What the plugin writes: HAMi's DeviceInfo per card (zero values left out)."""
    cards = [{"id": f"npu-{i}", "index": i, "count": slots, "type": "Ascend310P"} for i in range(n)]
    return json.dumps([{k: v for k, v in card.items() if v} for card in cards])


@pytest.mark.parametrize(
    ("annotations", "resource", "allocatable", "want"),
    [
        pytest.param({REGISTER: _cards(2)}, NPU, 14, 2, id="hami-lists-two-cards-of-seven-slots"),
        pytest.param({REGISTER: _cards(8, 4)}, NPU, 32, 8, id="hami-soft-eight-cards"),
        pytest.param({REGISTER: "[]"}, NPU, 0, 0, id="hami-registered-no-card"),
        pytest.param({REGISTER: "[]"}, NPU, 4, 4, id="empty-register-falls-back-to-allocatable"),
        pytest.param({}, NPU, 4, 4, id="whole-card-plugin-no-annotation"),
        pytest.param({REGISTER: "not json"}, NPU, 14, 14, id="malformed-json"),
        pytest.param({REGISTER: '{"id": "npu-0"}'}, NPU, 14, 14, id="an-object-not-a-list"),
        pytest.param({REGISTER: "[1, 2]"}, NPU, 14, 14, id="a-list-of-numbers"),
        pytest.param({REGISTER: "null"}, NPU, 14, 14, id="null"),
        pytest.param({REGISTER: "[" * 100_000}, NPU, 14, 14, id="deeply-nested"),
        pytest.param(
            {c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX + "Ascend910B4": _cards(2)},
            NPU,
            14,
            14,
            id="another-common-word",
        ),
        pytest.param({REGISTER: _cards(2)}, None, 0, 0, id="no-npu-resource"),
    ],
)
def test_physical_npus(
    annotations: dict[str, str], resource: str | None, allocatable: int, want: int
) -> None:
    assert nodes.physical_npus(annotations, resource, allocatable) == want


def _node(allocatable: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    labels = {c.POOL_LABEL: "a", c.HAMI_ASCEND_NODE_LABEL: "on", c.NPU_CHIP_NAME_LABEL: "310P3"}
    built = NodeWrapper("a1").labels(labels).annotations(annotations)
    return built.allocatable({"cpu": "64", "memory": "512Gi", **allocatable}).obj()


@pytest.mark.parametrize(
    ("allocatable", "annotations", "npus", "soft"),
    [
        pytest.param({NPU: "14"}, {REGISTER: _cards(2)}, 2, 8, id="hami-template-mode"),
        pytest.param({NPU: "8"}, {REGISTER: _cards(2, 4)}, 2, 8, id="hami-soft-4-slots"),
        pytest.param({NPU: "2"}, {}, 2, 8, id="whole-cards"),
        pytest.param({NPU: "14"}, {REGISTER: "{broken"}, 14, 56, id="broken-falls-back"),
    ],
)
def test_advertised_and_rollout_target_count_physical_cards(
    allocatable: dict[str, str], annotations: dict[str, str], npus: int, soft: int
) -> None:
    facts = cluster.sharing_facts(_node(allocatable, annotations))
    assert (facts.vendor, facts.npu_resource, facts.npus) == ("ascend", NPU, npus)
    result = result_of(policy("p", "Exclusive", ascend={"softSlicing": True, "vDeviceCount": 4}))
    assert advertised(result, facts) == {NPU: soft}
    assert rollout_targets.desired_node(result, facts).expected_allocatable == {NPU: soft}
