"""Ascend vNPU geometry through Tessera's real node agent (over a fake npu-smi).

The agents run as ``tessera agent vnpu`` processes under the ``tessera-agent`` ServiceAccount
of config/rbac, each with a token bound to its Pod on its node (``devcluster.identity``), so
the suite proves the agent's RBAC and the policy that keeps it to its own Node: a call they
refuse shows in an agent's log and fails the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import custom
from devcluster import fleet, identity, npunode
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.agent.vnpu import ERROR_ANNOTATION, RECORD_ANNOTATION
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import condition, eventually

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
POOL = "npg-ascend"


@pytest.fixture(scope="module")
def ascend_nodes(
    kube: Kube, rbac: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[npunode.AscendNodes]:
    sims = npunode.AscendNodes(kube, tmp_path_factory.mktemp("ascend")).start()
    fleet.create_nodes(kube, fleet.pool(POOL, "Ascend310P3", 2, devices=2))
    _wait_for_the_agent_policy(kube, tmp_path_factory.mktemp("policy-probe"))
    yield sims
    sims.stop()
    problems = sims.problems()
    assert not problems, "the vNPU agents logged refusals or crashes:\n" + "\n".join(problems)


def _wait_for_the_agent_policy(kube: Kube, folder: Path) -> None:
    """Until the API server enforces the agent's ValidatingAdmissionPolicy: it loads a new
    policy a moment after its creation (config/rbac is applied at the session's start), and a
    test of what the policy refuses must not race that. The probe is an agent token bound to
    no Pod, whose every change to a Node the policy refuses."""
    bearer = identity.token(kube, identity.AGENT)
    probe = Kube.from_kubeconfig(str(identity.kubeconfig(kube, bearer, "probe", folder / "kc")))
    node = path_of("v1", "nodes", f"{POOL}-0")
    key = "test.tessera.io/policy-probe"

    def refused() -> bool:
        try:
            probe.patch(node, {"metadata": {"annotations": {key: "x"}}})
        except ApiError as err:
            if err.status == 403 and "tessera-agent-own-node" in err.message:
                return True
            raise
        kube.patch(node, {"metadata": {"annotations": {key: None}}})  # not in force yet
        return False

    try:
        eventually(refused, 60, "the API server to enforce the policy tessera-agent-own-node")
    finally:
        probe.close()


def _ready(kube: Kube) -> bool:
    obj = kube.get_or_none(f"{NPG}/{POOL}")
    cond = condition(obj, "Ready")
    return bool(
        obj
        and cond
        and cond["status"] == "True"
        and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    )


def _allocatable(kube: Kube, node: str) -> dict[str, Any]:
    alloc: dict[str, Any] = kube.get(path_of("v1", "nodes", node))["status"]["allocatable"]
    return {k: v for k, v in alloc.items() if k.startswith("huawei.com/")}


def test_vnpu_layout_rolls_out_through_the_agent(
    kube: Kube, operator: OperatorProcess, ascend_nodes: npunode.AscendNodes
) -> None:
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: POOL}},
        "vnpu": {"layouts": [{"templates": {"vir04": 1, "vir02": 1, "vir02_1c": 1}}]},
        "rollout": {"maxUnavailable": 1},
    }
    kube.create(NPG, custom("NodePoolGeometry", POOL, spec))
    eventually(lambda: _ready(kube), 90, "Ascend pool Ready")
    for node in (f"{POOL}-0", f"{POOL}-1"):
        assert _allocatable(kube, node) == {
            "huawei.com/Ascend310P-4c": "2",
            "huawei.com/Ascend310P-2c": "2",
            "huawei.com/Ascend310P-2c.1cpu": "2",
        }
        created = ascend_nodes.npu_smi_state(node)
        assert sorted(v["template"] for v in created["0"].values()) == [
            "vir02",
            "vir02_1c",
            "vir04",
        ]
        meta = kube.get(path_of("v1", "nodes", node))["metadata"]
        assert meta["labels"][c.VNPU_CONFIG_STATE_LABEL] == "success"
        assert RECORD_ANNOTATION in meta["annotations"]
    status = kube.get(f"{NPG}/{POOL}")["status"]
    assert status["capacity"]["huawei.com/Ascend310P-4c"] == "4"
    assert not ascend_nodes.problems()  # every call of the agents was allowed

    # A new layout: the agent destroys exactly the vNPUs it made and creates the new ones.
    kube.patch(
        f"{NPG}/{POOL}",
        {"spec": {"vnpu": {"layouts": [{"templates": {"vir04": 1, "vir04_3c": 1}}]}}},
    )
    eventually(
        lambda: (
            _allocatable(kube, f"{POOL}-1")
            == {"huawei.com/Ascend310P-4c": "2", "huawei.com/Ascend310P-4c.3cpu": "2"}
        ),
        90,
        "second layout advertised",
    )
    eventually(lambda: _ready(kube), 90, "Ascend pool Ready again")
    created = ascend_nodes.npu_smi_state(f"{POOL}-0")
    assert sorted(v["template"] for v in created["1"].values()) == ["vir04", "vir04_3c"]


def test_template_combination_the_chip_cannot_hold_is_refused_before_any_cordon(
    kube: Kube, operator: OperatorProcess, ascend_nodes: npunode.AscendNodes
) -> None:
    eventually(lambda: _ready(kube), 90, "Ascend pool Ready")
    kube.patch(f"{NPG}/{POOL}", {"spec": {"vnpu": {"layouts": [{"templates": {"vir04": 2}}]}}})

    def stalled() -> dict[str, Any] | None:
        cond = condition(kube.get_or_none(f"{NPG}/{POOL}"), "Stalled")
        return cond if cond and cond["status"] == "True" else None

    cond = eventually(stalled, 60, "Stalled for an impossible vNPU layout")
    assert cond["reason"] == "InvalidGeometryForModel"
    assert "vir04" in cond["message"]
    for node in (f"{POOL}-0", f"{POOL}-1"):
        got = kube.get(path_of("v1", "nodes", node))
        assert not got["spec"].get("unschedulable")
        assert ERROR_ANNOTATION not in got["metadata"].get("annotations", {})


def _agent_kube(ascend_nodes: npunode.AscendNodes, node: str) -> Kube:
    agent = eventually(lambda: ascend_nodes.agents.get(node), 30, f"the agent of {node}")
    return Kube.from_kubeconfig(str(agent.kubeconfig))


def test_the_agent_runs_as_its_service_account_with_a_token_naming_its_node(
    ascend_nodes: npunode.AscendNodes,
) -> None:
    agent = _agent_kube(ascend_nodes, f"{POOL}-0")
    try:
        review = agent.create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    finally:
        agent.close()
    user = review["status"]["userInfo"]
    assert user["username"] == identity.AGENT.username
    assert user["extra"][identity.NODE_NAME_EXTRA] == [f"{POOL}-0"]


def test_the_agent_token_may_change_its_own_node_and_no_other(
    kube: Kube, ascend_nodes: npunode.AscendNodes
) -> None:
    own, other = f"{POOL}-0", f"{POOL}-1"
    agent = _agent_kube(ascend_nodes, own)
    try:  # what the agent reports, on its own Node: allowed; on another: refused
        agent.patch(
            path_of("v1", "nodes", own), {"metadata": {"annotations": {ERROR_ANNOTATION: "probe"}}}
        )
        with pytest.raises(ApiError) as refused:
            agent.patch(
                path_of("v1", "nodes", other),
                {"metadata": {"annotations": {ERROR_ANNOTATION: "probe"}}},
            )
        agent.patch(
            path_of("v1", "nodes", own), {"metadata": {"annotations": {ERROR_ANNOTATION: None}}}
        )
    finally:
        agent.close()
    assert refused.value.status == 403, refused.value
    message = refused.value.message
    assert "tessera-agent-own-node" in message, message
    assert f"tessera-agent on Node {own} may change only Node {own}, not Node {other}" in message
    untouched = kube.get(path_of("v1", "nodes", other))["metadata"].get("annotations") or {}
    assert ERROR_ANNOTATION not in untouched


# What the agent's token may not do to its own Node: the agents report through the vNPU state
# labels (vNPU config, vCANN-RT device-share), their annotations and the GPU agent's tessera.io/gpu-holders, nothing else (a compromised agent must not uncordon its Node, drop
# Tessera's taint, relabel it to attract workloads or forge another component's annotation).
OWN_NODE_REFUSALS = {
    "cordon": ({"spec": {"unschedulable": True}}, "may not change the spec of Node"),
    "taint": (
        {"spec": {"taints": [{"key": "x.test/t", "effect": "NoSchedule"}]}},
        "may not change the spec of Node",
    ),
    "label": (
        {"metadata": {"labels": {c.VNPU_CONFIG_LABEL: "forged"}}},
        "may change only the labels tessera.io/vnpu.config.state and",
    ),
    "device-share request": (
        {"metadata": {"labels": {c.NPU_DEVICE_SHARE_LABEL: "on", c.SOFT_SHARE_NODE_LABEL: "true"}}},
        "may change only the labels tessera.io/vnpu.config.state and",
    ),
    "new label": (
        {"metadata": {"labels": {"x.test/attract": "yes"}}},
        "may change only the labels tessera.io/vnpu.config.state and",
    ),
    "annotation": (
        {"metadata": {"annotations": {"x.test/probe": "x"}}},
        "may change only the annotations tessera.io/vnpu.config.error,",
    ),
}


def test_the_agent_token_may_publish_gpu_holders_on_its_own_node_and_no_other(
    kube: Kube, ascend_nodes: npunode.AscendNodes
) -> None:
    """The GPU agent shares the ServiceAccount, and so the policy: its one annotation."""
    own, other = f"{POOL}-0", f"{POOL}-1"
    record = {"metadata": {"annotations": {c.GPU_HOLDERS_ANNOTATION: '{"v":1}'}}}
    agent = _agent_kube(ascend_nodes, own)
    try:
        agent.patch(path_of("v1", "nodes", own), record)
        with pytest.raises(ApiError) as refused:
            agent.patch(path_of("v1", "nodes", other), record)
        agent.patch(
            path_of("v1", "nodes", own),
            {"metadata": {"annotations": {c.GPU_HOLDERS_ANNOTATION: None}}},
        )
    finally:
        agent.close()
    assert refused.value.status == 403, refused.value
    assert "tessera-agent-own-node" in refused.value.message, refused.value.message
    untouched = kube.get(path_of("v1", "nodes", other))["metadata"].get("annotations") or {}
    assert c.GPU_HOLDERS_ANNOTATION not in untouched


@pytest.mark.parametrize("change", OWN_NODE_REFUSALS)
def test_the_agent_token_may_change_only_its_reports_on_its_own_node(
    kube: Kube, ascend_nodes: npunode.AscendNodes, change: str
) -> None:
    own = f"{POOL}-0"
    patch, words = OWN_NODE_REFUSALS[change]
    before = kube.get(path_of("v1", "nodes", own))
    agent = _agent_kube(ascend_nodes, own)
    try:
        with pytest.raises(ApiError) as refused:
            agent.patch(path_of("v1", "nodes", own), patch)
    finally:
        agent.close()
    assert refused.value.status == 403, refused.value
    assert "tessera-agent-own-node" in refused.value.message, refused.value.message
    assert words in refused.value.message, refused.value.message
    after = kube.get(path_of("v1", "nodes", own))
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_the_agent_token_may_not_create_delete_or_touch_node_status(
    kube: Kube, ascend_nodes: npunode.AscendNodes
) -> None:
    """RBAC grants the agent get, list, watch and patch on Nodes: nothing else."""
    own, other = f"{POOL}-0", f"{POOL}-1"
    agent = _agent_kube(ascend_nodes, own)
    calls = {
        "delete another Node": lambda: agent.delete(path_of("v1", "nodes", other)),
        "delete its own Node": lambda: agent.delete(path_of("v1", "nodes", own)),
        "create a Node": lambda: agent.create(
            path_of("v1", "nodes"), {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}}
        ),
        "patch its Node's status": lambda: agent.patch(
            path_of("v1", "nodes", own) + "/status", {"status": {"capacity": {"x.test/r": "1"}}}
        ),
        "read a Secret": lambda: agent.get(path_of("v1", "secrets", namespace="tessera-system")),
    }
    statuses = {}
    try:
        for name, call in calls.items():
            with pytest.raises(ApiError) as refused:
                call()
            statuses[name] = refused.value.status
    finally:
        agent.close()
    assert statuses == dict.fromkeys(calls, 403)
    assert kube.get_or_none(path_of("v1", "nodes", other)) is not None


def test_an_agent_token_bound_to_no_node_may_change_no_node(
    kube: Kube, ascend_nodes: npunode.AscendNodes, tmp_path: Path
) -> None:
    """A token of the agent's ServiceAccount minted by hand (bound to no Pod) changes nothing."""
    bearer = identity.token(kube, identity.AGENT)
    config = identity.kubeconfig(kube, bearer, "by-hand", tmp_path / "unbound.kubeconfig")
    unbound = Kube.from_kubeconfig(str(config))
    node = f"{POOL}-0"
    try:
        with pytest.raises(ApiError) as refused:
            unbound.patch(path_of("v1", "nodes", node), {"metadata": {"labels": {"x": "y"}}})
    finally:
        unbound.close()
    assert refused.value.status == 403, refused.value
    assert "this token is bound to none" in refused.value.message
    assert f"refused its change to Node {node}" in refused.value.message
