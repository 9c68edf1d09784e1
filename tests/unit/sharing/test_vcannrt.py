"""vCANN-RT mode: the node's device-share move, its rollout target, its holds and its notices.

Tables in the kueue style: each row a node as the cluster shows it and what the plan must
say. The agent's device-share labels are written by hand here (the agent is tested over the
simulated npu-smi in tests/unit/simulators and tests/integration/test_vcannrt.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from sharing_builders import POOL, policy

from tessera.api import constants as c
from tessera.domain.geometry import device_share
from tessera.domain.rollout import NodeView, targets
from tessera.domain.sharing import ascend_rules, nodes, planning, rollout_targets, status, vcannrt
from tessera.domain.sharing.rendering import result_of

VOLCANO = {"name": "Volcano", "volcano": {}}
VERSIONS = {
    vcannrt.HDK_VERSION_LABEL: "25.5.0",
    vcannrt.CANN_VERSION_LABEL: "9.1.0",
    vcannrt.MINDCLUSTER_VERSION_LABEL: "26.0.0.0",
}


def _vcannrt(**spec: Any) -> Any:
    return policy("vc", "Exclusive", ascend={"mode": "VCannRT"}, scheduler=VOLCANO, **spec)


def _templates() -> Any:
    return policy("tp", "Exclusive", ascend={"mode": "Templates"}, scheduler=VOLCANO)


def b4(*labelsets: Mapping[str, str], name: str = "b4-0", npus: int = 2) -> nodes.NodeFacts:
    all_labels = {POOL: "a", c.NPU_CHIP_NAME_LABEL: "910B4", c.NPU_COUNT_LABEL: str(npus)}
    for more in labelsets:
        all_labels.update(more)
    return nodes.from_node(
        name,
        all_labels,
        npus=npus,
        npu_resource="huawei.com/Ascend910",
        allocatable={"huawei.com/Ascend910": npus},
    )


ON = {c.NPU_DEVICE_SHARE_LABEL: "on", c.NPU_DEVICE_SHARE_STATE_LABEL: "success"}
ASKED = {c.NPU_DEVICE_SHARE_LABEL: "on", c.NPU_DEVICE_SHARE_STATE_LABEL: "pending"}
OFF = {c.NPU_DEVICE_SHARE_LABEL: "off", c.NPU_DEVICE_SHARE_STATE_LABEL: "success"}


@pytest.mark.parametrize(
    ("under", "labels", "wanted", "now", "moves"),
    [
        ("vcannrt", {}, "on", "off", "device-share off -> on on node b4-0"),
        ("vcannrt", ASKED, "on", "off", "device-share off -> on on node b4-0"),
        ("vcannrt", ON, "on", "on", None),
        ("templates", ON, "off", "on", "device-share on -> off on node b4-0"),
        ("templates", OFF, None, "off", None),
        ("templates", {}, None, "off", None),
        ("none", ON, "off", "on", "device-share on -> off on node b4-0"),
    ],
)
def test_the_device_share_move_of_a_node(
    under: str, labels: dict[str, str], wanted: str | None, now: str, moves: str | None
) -> None:
    chosen = {"vcannrt": _vcannrt(), "templates": _templates()}.get(under)
    result = result_of(chosen) if chosen is not None else None
    node = b4(labels)
    assert vcannrt.wanted(result, node) == wanted
    assert vcannrt.now(node) == now
    found = vcannrt.change(result, node)
    if moves is None:
        assert found is None
    else:
        assert found is not None and found.kind == "disruptive" and moves in found.reason


def test_a_node_switched_on_waits_for_the_rollout_and_then_needs_no_change() -> None:
    node = b4()
    plan = planning.plan([_vcannrt()], planning.SharingObserved(nodes=(node,)))
    assert "device-share off -> on" in plan.awaiting_rollout["b4-0"].reason
    assert plan.hami_ascend.converged  # HAMi has no part in vCANN-RT
    done = b4(ON, {c.SOFT_SHARE_NODE_LABEL: "true"})
    settled = planning.plan([_vcannrt()], planning.SharingObserved(nodes=(done,)))
    assert settled.awaiting_rollout == {}


def test_the_rollout_target_on_asks_the_agent_and_the_plugins_100_units_per_npu() -> None:
    result = result_of(_vcannrt())
    desired = rollout_targets.desired_node(result, b4({"tessera.io/hami-mode": "x"}))
    assert desired.labels == {
        c.NPU_DEVICE_SHARE_LABEL: "on",
        c.SOFT_SHARE_NODE_LABEL: "true",
        rollout_targets.HAMI_MODE_LABEL: None,  # leaving HAMi's mode label behind
    }
    assert desired.watch_label == c.NPU_DEVICE_SHARE_STATE_LABEL
    assert desired.expected_allocatable == {"huawei.com/Ascend910": 2 * 100}


def test_leaving_vcannrt_writes_off_and_waits_for_the_agent() -> None:
    desired = rollout_targets.desired_node(result_of(_templates()), b4(ON))
    assert desired.labels[c.NPU_DEVICE_SHARE_LABEL] == "off"
    assert desired.labels[c.SOFT_SHARE_NODE_LABEL] == "false"
    assert desired.watch_label == c.NPU_DEVICE_SHARE_STATE_LABEL
    # the agent's stale "success" for "on" is dropped with the request, so it cannot verify off
    target = targets.target_of(desired)
    view = NodeView(name="b4-0", labels=dict(b4(ON).labels))
    patch = targets.labels_to_write(target, view)
    assert patch[c.NPU_DEVICE_SHARE_STATE_LABEL] is None


@pytest.mark.parametrize(
    ("labels", "allocatable", "reason", "words"),
    [
        ({"ascend": "on"}, {}, "Conflict", "vCANN-RT and HAMi mode on the same node"),
        (
            {},
            {"huawei.com/Ascend910-5c.1cpu.8g": 4},
            "",
            "preset vNPUs (huawei.com/Ascend910-5c.1cpu.8g: 4)",
        ),
        (
            {vcannrt.CANN_VERSION_LABEL: "8.3.0"},
            {},
            "",
            "node b4-0: CANN 8.3.0 (needs 8.5.0 or 9.1.0)",
        ),
    ],
)
def test_a_node_vcannrt_cannot_run_on_is_held_naming_why(
    labels: dict[str, str], allocatable: dict[str, int], reason: str, words: str
) -> None:
    all_labels = {POOL: "a", c.NPU_CHIP_NAME_LABEL: "910B4", **labels}
    node = nodes.from_node("b4-0", all_labels, npus=2, allocatable=allocatable)
    ascend = _vcannrt().spec.ascend
    (error,) = ascend_rules.check(ascend, node)
    assert error.reason == reason and words in error.rule and error.node == "b4-0"


def test_vcannrt_on_a_310p3_node_is_refused_by_the_matrix() -> None:
    node = nodes.from_node("p-0", {POOL: "a", c.NPU_CHIP_NAME_LABEL: "310P3"}, npus=2)
    (error,) = ascend_rules.check(_vcannrt().spec.ascend, node)
    assert "chip 310P3" in error.rule and "does not support vCANN-RT" in error.rule
    assert "310P3 supports:" in error.rule


def _extra(node: nodes.NodeFacts) -> dict[str, tuple[str, str, str]]:
    plan = planning.plan([_vcannrt()], planning.SharingObserved(nodes=(node,)))
    verdict = status.summarize(plan, "vc", (node,)).verdict
    return {kind: (state, reason, message) for kind, state, reason, message in verdict.extra}


def test_the_reference_only_notice_is_a_condition_whatever_the_nodes_say() -> None:
    state, reason, message = _extra(b4(ON, VERSIONS))["ReferenceOnly"]
    assert (state, reason) == ("True", "NotForCommercialUse")
    assert "not for commercial products" in message


@pytest.mark.parametrize(
    ("labels", "state", "reason", "words"),
    [
        ({}, "Unknown", "Unverified", "unverified on b4-0"),
        ({vcannrt.HDK_VERSION_LABEL: "25.5.0"}, "Unknown", "Unverified", "HDK 25.5.0, CANN"),
        (VERSIONS, "True", "Verified", "every node publishes HDK 25.5.0"),
        (
            {**VERSIONS, vcannrt.MINDCLUSTER_VERSION_LABEL: "7.3.0"},
            "False",
            "WrongVersion",
            "MindCluster 7.3.0 (needs 26.0.0.0)",
        ),
    ],
)
def test_the_prerequisites_condition_says_what_the_node_labels_show(
    labels: dict[str, str], state: str, reason: str, words: str
) -> None:
    found = _extra(b4(labels))["Prerequisites"]
    assert found[:2] == (state, reason) and words in found[2]


def test_no_condition_of_vcannrt_on_a_policy_of_another_mode() -> None:
    node = b4()
    plan = planning.plan([_templates()], planning.SharingObserved(nodes=(node,)))
    kinds = {e[0] for e in status.summarize(plan, "tp", (node,)).verdict.extra}
    assert kinds.isdisjoint({"ReferenceOnly", "Prerequisites"})


def test_status_advertises_100_units_per_shared_npu() -> None:
    node = b4(ON, {c.SOFT_SHARE_NODE_LABEL: "true"}, npus=3)
    plan = planning.plan([_vcannrt()], planning.SharingObserved(nodes=(node,)))
    assert status.summarize(plan, "vc", (node,)).advertised == {"huawei.com/Ascend910": "300"}


# -- npu-smi's words


@pytest.mark.parametrize(
    ("mode", "argv"),
    [
        ("on", ["set", "-t", "device-share", "-i", "1", "-c", "0", "-d", "1"]),
        ("off", ["set", "-t", "device-share", "-i", "1", "-c", "0", "-d", "0"]),
    ],
)
def test_set_commands_switch_every_npu(mode: device_share.Mode, argv: list[str]) -> None:
    found = device_share.set_commands(2, mode)
    assert len(found) == 2 and found[1] == argv


@pytest.mark.parametrize(
    ("output", "status_"),
    [
        ("        Device-share Status            : True", True),
        ("Device-share Status : False", False),
        ("This device does not support querying device-share.", None),
    ],
)
def test_read_back_parses_npu_smis_status(output: str, status_: bool | None) -> None:
    assert device_share.parse_status(output) is status_


def test_a_read_back_that_disagrees_names_the_npu() -> None:
    assert device_share.mismatch({0: True, 1: True}, "on") == ""
    wrong = device_share.mismatch({0: True, 1: None, 2: False}, "on")
    assert wrong == "device-share on not read back: NPU 1 reads unreadable, NPU 2 reads False"


def test_a_released_node_still_shared_is_switched_off_a_governed_one_is_not() -> None:
    kept, freed = b4(ON, name="b4-0"), b4(ON, {POOL: "gone"}, name="b4-1")
    never = b4({POOL: "gone"}, name="b4-2")
    seen = {n.name: n for n in (kept, freed, never)}
    plan = planning.plan([_vcannrt()], planning.SharingObserved(nodes=tuple(seen.values())))
    assert rollout_targets.stale_device_share(plan.assignment, seen) == ("b4-1",)
