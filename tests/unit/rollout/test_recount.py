"""The recount right after a cordon: the admitting pass requests the layout of an empty node."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from rollout_builders import POOL, T0, desired, kinds, policy, state, written

from builders.views import NEW, OLD, gpu_pod, node
from tessera.api.constants import MIG_CONFIG_LABEL, VGPU_CONFIG_LABEL, VGPU_CONFIG_STATE_LABEL
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.recount import just_cordoned, request_layouts
from tessera.domain.rollout.state import Phase, TargetSpec
from tessera.domain.rollout.views import DesiredNode, NodeView, PodView

CORDONED = state(Phase.CORDONED)
VGPU_TYPES = {"nvidia.com/NVIDIA_A100D-20C": 16}
VGPU = DesiredNode(
    target="tessera-vms-1",
    labels={VGPU_CONFIG_LABEL: "tessera-vms-1"},
    watch_label=VGPU_CONFIG_STATE_LABEL,
    expected_allocatable=VGPU_TYPES,
)
VGPU_CORDONED = replace(
    CORDONED,
    target=TargetSpec(
        "tessera-vms-1", {VGPU_CONFIG_LABEL: "tessera-vms-1"}, VGPU_CONFIG_STATE_LABEL, VGPU_TYPES
    ),
)
HELD = {"cordoned": True, "tainted": True}  # as the cordon's write returned the node


@dataclass
class Case:
    nodes: list[NodeView]
    want: list[str]
    pods: list[PodView] = field(default_factory=list)
    desired: dict[str, DesiredNode] | None = None


CASES = {
    "cordoned, no pods: state, then the layout": Case(
        [node(st=CORDONED, **HELD)], ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"]
    ),
    "a pod to evict: left to the next pass, nothing decided": Case(
        [node(st=CORDONED, **HELD)], [], pods=[gpu_pod("train")]
    ),
    "a DaemonSet pod is never evicted: the layout goes ahead": Case(
        [node(st=CORDONED, **HELD)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
        pods=[gpu_pod("dcgm", owner_kind="DaemonSet")],
    ),
    "the cordon did not land (uncordoned meanwhile): nothing": Case(
        [node(st=CORDONED, tainted=True)], []
    ),
    "the taint is gone: nothing, the next pass re-taints first": Case(
        [node(st=CORDONED, cordoned=True)], []
    ),
    "already draining: not this pass's admission": Case(
        [node(st=state(Phase.DRAINING), **HELD)], []
    ),
    "another pool's node: never": Case(
        [node(st=replace(CORDONED, owner="NodePoolGeometry/x"), **HELD)], []
    ),
    "no state: never": Case([node(**HELD)], []),
    "the layout turned invalid: the next pass backs out": Case(
        [node(st=CORDONED, **HELD)], [], desired={"gpu-1": desired(invalid="no room")}
    ),
    "left the pool: the next pass releases it": Case([node(st=CORDONED, **HELD)], [], desired={}),
    "the agent is mid-flight (pending): its verdict could land after the request": Case(
        [node(st=CORDONED, agent="pending", **HELD)], []
    ),
    "the MIG manager has said nothing yet (a fresh node): nothing it could report": Case(
        [node(st=CORDONED, agent=None, **HELD)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
    ),
    "a fresh vGPU node: its Device Manager reports its start-up default": Case(
        [replace(node(st=VGPU_CORDONED, agent=None, **HELD), labels={})],
        [],
        desired={"gpu-1": VGPU},
    ),
    "a vGPU node that reported: settled": Case(
        [replace(node(st=VGPU_CORDONED, **HELD), labels={VGPU_CONFIG_STATE_LABEL: "failed"})],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
        desired={"gpu-1": VGPU},
    ),
    "the agent failed the current labels: settled, the request goes out": Case(
        [node(st=CORDONED, agent="failed", **HELD)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
    ),
    "two nodes, one empty: only that one": Case(
        [node("gpu-1", st=CORDONED, **HELD), node("gpu-2", st=CORDONED, **HELD)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-2"],
        pods=[gpu_pod("train", on="gpu-1")],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_request_layouts(case: Case) -> None:
    want = case.desired if case.desired is not None else {n.name: desired() for n in case.nodes}
    got = request_layouts(POOL, policy(), want, case.nodes, case.pods, T0)
    assert kinds(got) == case.want


def test_the_layout_written_is_the_target_and_the_state_says_the_recount_was_empty() -> None:
    got = request_layouts(POOL, policy(), {"gpu-1": desired()}, [node(st=CORDONED, **HELD)], [], T0)
    labels = next(a for a in got if isinstance(a, act.SetNodeLabels))
    assert labels.labels[MIG_CONFIG_LABEL] == NEW
    assert written(got).phase == Phase.VERIFYING
    assert "recount found no pods" in labels.reason


def test_a_target_moved_since_the_admission_is_the_one_requested() -> None:
    got = request_layouts(
        POOL, policy(), {"gpu-1": desired(OLD)}, [node(config=NEW, st=CORDONED, **HELD)], [], T0
    )
    labels = next(a for a in got if isinstance(a, act.SetNodeLabels))
    assert labels.labels[MIG_CONFIG_LABEL] == OLD


def test_just_cordoned_names_only_this_pools_cordoned_nodes() -> None:
    nodes = [
        node("a", st=CORDONED),
        node("b", st=state(Phase.VERIFYING)),
        node("c", st=replace(CORDONED, owner="NodePoolGeometry/x")),
        node("d"),
    ]
    assert [n.name for n in nodes if just_cordoned(POOL, n)] == ["a"]


def test_a_vgpu_node_is_not_admitted_before_its_device_manager_reported() -> None:
    """Its start-up verdict on the default config could otherwise answer the request."""
    from tessera.domain.rollout.planning import plan

    fresh = replace(node(), labels={})
    waiting = plan(POOL, policy(), {"gpu-1": VGPU}, [fresh], [], [], T0)
    assert kinds(waiting.actions) == []
    assert "has not reported yet" in waiting.nodes[0].message
    reported = replace(fresh, labels={VGPU_CONFIG_STATE_LABEL: "failed"})
    admitted = plan(POOL, policy(), {"gpu-1": VGPU}, [reported], [], [], T0)
    assert "Cordon:gpu-1" in kinds(admitted.actions)
