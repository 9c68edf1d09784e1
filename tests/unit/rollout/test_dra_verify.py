"""Rollouts on DRA nodes (issue 16, item 3): the plugin restart and the ResourceSlice check,
one table row per situation of a node verifying its layout, through ``plan``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

import pytest
from rollout_builders import POOL, T0, kinds, policy, secs, state, written

from builders.views import NEW, OLD, node
from tessera.api.constants import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.planning import Plan, plan
from tessera.domain.rollout.state import NodeState, Phase, TargetSpec, decode, encode
from tessera.domain.rollout.views import DesiredNode, DraNode, NodeView, PluginPod

PLUGIN = "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin"
OLD_DEVICES, NEW_DEVICES = {"1g.10gb": 56}, {"3g.40gb": 16}
DEVICES = {OLD: OLD_DEVICES, NEW: NEW_DEVICES}


def pod(uid: str, *, terminating: bool = False, ready: bool = True) -> PluginPod:
    return PluginPod(PLUGIN.split("/", maxsplit=1)[0], f"plugin-{uid}", uid, terminating, ready)


def dra_target(name: str) -> TargetSpec:
    return TargetSpec(
        name, {MIG_CONFIG_LABEL: name}, MIG_CONFIG_STATE_LABEL, None, DEVICES[name], PLUGIN
    )


def want(name: str = NEW) -> DesiredNode:
    return DesiredNode(
        target=name,
        labels={MIG_CONFIG_LABEL: name},
        watch_label=MIG_CONFIG_STATE_LABEL,
        expected_devices=DEVICES[name],
        plugin=PLUGIN,
    )


def verifying(restarted: str | None = None, **kw: object) -> NodeState:
    base = state(Phase.VERIFYING, target=dra_target(NEW), last_good=dra_target(OLD))
    return replace(base, restarted=restarted, **kw)  # type: ignore[arg-type]


def dra_node(
    st: NodeState | None,
    *,
    config: str = NEW,
    agent: str = "success",
    devices: dict[str, int] | None = None,
    pods: tuple[PluginPod, ...] = (pod("p1"),),
    cordoned: bool = True,
) -> NodeView:
    view = node(config=config, agent=agent, st=st, cordoned=cordoned, tainted=cordoned, alloc={})
    return replace(view, dra=DraNode(devices, {PLUGIN: pods}))


@dataclass
class Case:
    node: NodeView
    want: list[str]
    now: datetime = T0 + secs(30)
    restarted: str | None = None  # the state written for gpu-1 records this uid
    phase: Phase | None = None
    problem: str = ""  # a fragment of the node's problem message


def run(c: Case) -> Plan:
    return plan(POOL, policy(), {"gpu-1": want()}, [c.node], [], [], c.now)


STALE = OLD_DEVICES  # what the plugin published before the MIG change
CASES = {
    "agent still pending: the plugin is not touched": Case(
        dra_node(verifying(), agent="pending", devices=STALE), []
    ),
    "agent success: the pod's uid is recorded, then the pod deleted": Case(
        dra_node(verifying(), devices=STALE),
        ["SetNodeState:Verifying", "DeletePod:nvidia-dra-driver-gpu/plugin-p1"],
        restarted="p1",
    ),
    "success with slices already right: restarted all the same (they predate the change)": Case(
        dra_node(verifying(), devices=NEW_DEVICES),
        ["SetNodeState:Verifying", "DeletePod:nvidia-dra-driver-gpu/plugin-p1"],
        restarted="p1",
    ),
    "recorded but the old pod still runs (the delete was lost): delete it again": Case(
        dra_node(verifying("p1"), devices=STALE),
        ["DeletePod:nvidia-dra-driver-gpu/plugin-p1"],
    ),
    "the old pod never goes (a delete refused each pass): Failed at verifyTimeout": Case(
        dra_node(verifying("p1"), devices=STALE),
        ["SetNodeState:Failed"],
        now=T0 + secs(901),
        phase=Phase.FAILED,
        problem="restarting kubelet-plugin pod of DaemonSet " + PLUGIN + " on node gpu-1",
    ),
    "old pod terminating, no new one yet: wait": Case(
        dra_node(verifying("p1"), devices=STALE, pods=(pod("p1", terminating=True),)), []
    ),
    "new pod not ready yet, slices right: still wait for it": Case(
        dra_node(verifying("p1"), devices=NEW_DEVICES, pods=(pod("p2", ready=False),)), []
    ),
    "new pod ready, slices still the old ones: wait": Case(
        dra_node(verifying("p1"), devices=STALE, pods=(pod("p2"),)), []
    ),
    "new pod ready, the slice wiped and not published again yet: wait, never Failed early": Case(
        dra_node(verifying("p1"), devices=None, pods=(pod("p2"),)), []
    ),
    "new pod ready, slices publish the layout: verified and released": Case(
        dra_node(verifying("p1"), devices=NEW_DEVICES, pods=(pod("p2"),)),
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "Uncordon:gpu-1", "ClearNodeState:gpu-1"],
        restarted="p1",
    ),
    "no plugin pod at all: recorded as none, the next one to start will publish": Case(
        dra_node(verifying(), devices=STALE, pods=()),
        ["SetNodeState:Verifying"],
        restarted="",
    ),
    "no plugin pod within verifyTimeout: Failed, naming node, expected and published": Case(
        dra_node(verifying(""), devices=None, pods=()),
        ["SetNodeState:Failed"],
        now=T0 + secs(901),
        phase=Phase.FAILED,
        problem=(
            "no ready kubelet-plugin pod of DaemonSet " + PLUGIN + " on node gpu-1 since the "
            "restart; node gpu-1: ResourceSlices of driver gpu.nvidia.com publish no complete "
            "ResourceSlice pool, want {3g.40gb: 16}"
        ),
    ),
    "slices wrong after the restart within verifyTimeout: Failed with both counts": Case(
        dra_node(verifying("p1"), devices={"3g.40gb": 8}, pods=(pod("p2"),)),
        ["SetNodeState:Failed"],
        now=T0 + secs(901),
        phase=Phase.FAILED,
        problem="publish {3g.40gb: 8}, want {3g.40gb: 16}",
    ),
    "someone changed the label after the restart: asked again, restart again later": Case(
        dra_node(verifying("p1"), config="hand-edit", devices=STALE, pods=(pod("p2"),)),
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
        restarted=None,
    ),
    "idle node whose slices publish its layout: Updated, nothing written": Case(
        dra_node(None, devices=NEW_DEVICES, cordoned=False), []
    ),
    "idle node at its label, its complete pool publishes other devices: drift, rolled again": Case(
        dra_node(None, devices=STALE, cordoned=False),
        ["SetNodeState:Cordoned", "AddTaint:gpu-1", "Cordon:gpu-1"],
    ),
    "idle node at its label, no slice and no plugin (driver gone): waits, nothing written": Case(
        dra_node(None, devices=None, pods=(), cordoned=False), []
    ),
    "idle node at its label, no complete pool while its plugin runs: waits, nothing written": Case(
        dra_node(None, devices=None, cordoned=False), []
    ),
    "layout differs, no pool and no plugin pod: never cordoned": Case(
        dra_node(None, config=OLD, devices=None, pods=(), cordoned=False), []
    ),
    "layout differs, no pool, its plugin pod not ready: never cordoned": Case(
        dra_node(None, config=OLD, devices=None, pods=(pod("p1", ready=False),), cordoned=False),
        [],
    ),
    "layout differs, no pool, its plugin pod terminating: never cordoned": Case(
        dra_node(
            None, config=OLD, devices=None, pods=(pod("p1", terminating=True),), cordoned=False
        ),
        [],
    ),
    "layout differs, no pool yet but a ready plugin pod: started": Case(
        dra_node(None, config=OLD, devices=None, cordoned=False),
        ["SetNodeState:Cordoned", "AddTaint:gpu-1", "Cordon:gpu-1"],
    ),
    "layout differs, a complete pool: started": Case(
        dra_node(None, config=OLD, devices=STALE, pods=(), cordoned=False),
        ["SetNodeState:Cordoned", "AddTaint:gpu-1", "Cordon:gpu-1"],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_a_dra_node_verifying_its_layout(case: Case) -> None:
    result = run(case)
    assert kinds(result.actions) == case.want
    if any(isinstance(a, act.SetNodeState) for a in result.actions):
        last = written(result.actions)
        assert last.restarted == case.restarted or case.phase is not None
        if case.phase is not None:
            assert last.phase == case.phase
    if case.problem:
        assert [p for p in result.problems if case.problem in p.message], result.problems


WAITS = ("progressing", "WaitingForDriver")


@pytest.mark.parametrize(
    ("view", "verdict", "phase", "blocked"),
    [
        pytest.param(
            dra_node(None, devices=None, pods=(), cordoned=False),
            WAITS,
            "Updated",
            False,
            id="at-its-label-no-driver",
        ),
        pytest.param(
            dra_node(None, devices=None, cordoned=False),
            WAITS,
            "Updated",
            False,
            id="at-its-label-plugin-not-published-yet",
        ),
        pytest.param(
            dra_node(None, config=OLD, devices=None, pods=(), cordoned=False),
            WAITS,
            "Pending",
            True,
            id="layout-differs-no-driver",
        ),
        pytest.param(
            dra_node(None, devices=NEW_DEVICES, cordoned=False),
            ("ready", "Succeeded"),
            "Updated",
            False,
            id="published",
        ),
    ],
)
def test_a_node_without_its_driver_makes_the_pool_wait_for_it(
    view: NodeView, verdict: tuple[str, str], phase: str, blocked: bool
) -> None:
    """Reconciling, reason WaitingForDriver, naming the node (and the change that waits)."""
    result = plan(POOL, policy(), {"gpu-1": want()}, [view], [], [], T0)
    assert (result.verdict.state, result.verdict.reason) == verdict, result.verdict.message
    assert [r.phase.value for r in result.nodes] == [phase]
    assert result.counts.updated == (phase == "Updated")
    if verdict == WAITS:
        assert "node(s) gpu-1 publish no ResourceSlice of driver gpu.nvidia.com" in (
            result.verdict.message
        )
        assert ("a layout change waits for it on gpu-1" in result.verdict.message) == blocked
    assert not result.actions


def test_a_slot_is_not_spent_on_a_node_without_its_driver() -> None:
    """The next node with its driver starts while the driverless one waits (maxUnavailable 1)."""
    other = replace(dra_node(None, config=OLD, devices=STALE, cordoned=False), name="gpu-2")
    views = [dra_node(None, config=OLD, devices=None, pods=(), cordoned=False), other]
    result = plan(POOL, policy(), {"gpu-1": want(), "gpu-2": want()}, views, [], [], T0)
    assert kinds(result.actions) == ["SetNodeState:Cordoned", "AddTaint:gpu-2", "Cordon:gpu-2"]
    assert result.verdict.reason == "RollingOut"


def test_the_restart_deletes_the_recorded_pod_by_uid() -> None:
    result = run(Case(dra_node(verifying(), devices=STALE), []))
    (delete,) = [a for a in result.actions if isinstance(a, act.DeletePod)]
    assert (delete.namespace, delete.name, delete.uid, delete.node) == (
        "nvidia-dra-driver-gpu",
        "plugin-p1",
        "p1",
        "gpu-1",
    )
    assert "enumerates MIG devices only when it starts" in delete.reason


def test_a_new_request_forgets_the_last_restart() -> None:
    """Applying → Verifying (a retarget, a rollback) restarts the plugin once more."""
    applying = replace(verifying("p1"), phase=Phase.APPLYING)
    view = dra_node(applying, config=OLD, devices=STALE, pods=(pod("p2"),))
    result = plan(POOL, policy(), {"gpu-1": want()}, [view], [], [], T0 + secs(30))
    assert kinds(result.actions) == ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"]
    assert written(result.actions).restarted is None


def test_rollback_returns_to_the_published_devices_of_before() -> None:
    """The last good layout of a DRA node is what its slices published when it started."""
    view = dra_node(None, config=OLD, devices=STALE, cordoned=False)
    result = plan(POOL, policy(), {"gpu-1": want()}, [view], [], [], T0)
    good = written(result.actions).last_good
    assert good is not None and good.devices == STALE and good.plugin == PLUGIN
    assert good.labels == {MIG_CONFIG_LABEL: OLD}


def test_no_rollback_target_without_a_complete_pool() -> None:
    view = dra_node(None, config=OLD, devices=None, cordoned=False)
    result = plan(POOL, policy(), {"gpu-1": want()}, [view], [], [], T0)
    assert written(result.actions).last_good is None


def test_the_record_round_trips_devices_plugin_and_restart() -> None:
    for restarted in (None, "", "p1"):
        s = verifying(restarted)
        assert decode(encode(s)) == s


def test_rollback_on_a_dra_node_restarts_the_plugin_and_verifies_the_old_devices() -> None:
    """``onFailure: Rollback``: the last good layout is requested, the plugin restarted once
    more, and the node verified against what its slices published before the change."""
    rollback = policy(onFailure="Rollback")
    failed = replace(verifying("p1"), phase=Phase.FAILED, message="not verified")
    view = dra_node(failed, devices={"3g.40gb": 8}, pods=(pod("p2"),))
    first = written(plan(POOL, rollback, {"gpu-1": want()}, [view], [], [], T0).actions)
    assert (first.phase, first.target.devices, first.rollback_of) == (Phase.APPLYING, STALE, NEW)

    view = dra_node(first, devices={"3g.40gb": 8}, pods=(pod("p2"),))
    second = plan(POOL, rollback, {"gpu-1": want()}, [view], [], [], T0)
    assert kinds(second.actions) == ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"]
    asked = written(second.actions)
    assert asked.restarted is None

    view = dra_node(asked, config=OLD, devices={"3g.40gb": 8}, pods=(pod("p2"),))
    third = plan(POOL, rollback, {"gpu-1": want()}, [view], [], [], T0)
    assert kinds(third.actions) == [
        "SetNodeState:Verifying",
        "DeletePod:nvidia-dra-driver-gpu/plugin-p2",
    ]

    view = dra_node(written(third.actions), config=OLD, devices=STALE, pods=(pod("p3"),))
    fourth = plan(POOL, rollback, {"gpu-1": want()}, [view], [], [], T0)
    settled = written(fourth.actions)
    assert (settled.phase, settled.rolled_back) == (Phase.FAILED, True), kinds(fourth.actions)
    assert "Uncordon:gpu-1" in kinds(fourth.actions)
