"""The rollout engine reads the vGPU Device Manager's states as it reads the MIG manager's:
``pending`` and ``rebooting`` are waits, ``failed`` fails the node (Hold keeps it cordoned,
Rollback writes the last good config), ``success`` with the sandbox plugin's resources verifies."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rollout_builders import POOL, T0, kinds, policy, secs, state, written

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain import rollout
from tessera.domain.cluster import pools
from tessera.domain.rollout import Phase
from tessera.domain.rollout.state import NodeState
from tessera.domain.rollout.targets import labels_to_write, target_of
from tessera.domain.rollout.views import NodeView

NODE = {
    c.GPU_PRODUCT_LABEL: "NVIDIA-A100-PCIE-40GB",
    c.GPU_COUNT_LABEL: "2",
    c.GPU_WORKLOAD_CONFIG_LABEL: "vm-vgpu",
}


def _desired(types: dict[str, int]) -> rollout.DesiredNode:
    spec = NodePoolGeometrySpec.model_validate(
        {"nodeSelector": {}, "vgpu": {"layouts": [{"types": types}]}}
    )
    return pools.target_for("h100", spec, NODE, {}).desired


NEW, OLD = _desired({"A100-20C": 2}), _desired({"A100-10C": 4})


def _node(
    agent: str, alloc: dict[str, int], on_failure: str = "Hold", st: NodeState | None = None
) -> rollout.Plan:
    """One pass over node gpu-1, Verifying the new vGPU config (or in state ``st``)."""
    verifying = state(Phase.VERIFYING, since=T0)
    st = st or replace(verifying, target=target_of(NEW), last_good=target_of(OLD))
    rules = policy(onFailure=on_failure)
    return rollout.plan(
        POOL, rules, {"gpu-1": NEW}, [_view(agent, alloc, st)], [], [], T0 + secs(30)
    )


def _view(agent: str, alloc: dict[str, int], st: NodeState) -> NodeView:
    labels = {**NODE, c.VGPU_CONFIG_LABEL: NEW.target, c.VGPU_CONFIG_STATE_LABEL: agent}
    return NodeView(
        name="gpu-1", labels=labels, unschedulable=True, ready=True, allocatable=alloc, state=st
    )


@pytest.mark.parametrize("agent", ["pending", "rebooting"])
def test_pending_and_rebooting_are_waits(agent: str) -> None:
    plan = _node(agent, {})
    (report,) = plan.nodes
    assert report.phase == rollout.ReportPhase.VERIFYING
    assert report.message.startswith("waiting: ")
    assert "Uncordon:gpu-1" not in kinds([a for stage in plan.stages for a in stage])


def test_success_with_the_sandbox_plugins_resources_verifies() -> None:
    plan = _node("success", {"nvidia.com/NVIDIA_A100-20C": 4})
    actions = [a for stage in plan.stages for a in stage]
    assert "Uncordon:gpu-1" in kinds(actions)


def test_success_without_the_resources_keeps_waiting() -> None:
    plan = _node("success", {"nvidia.com/NVIDIA_A100-10C": 8})
    (report,) = plan.nodes
    assert "allocatable nvidia.com/NVIDIA_A100-20C is 0, want 4" in report.message


def test_failed_holds_or_rolls_back_to_the_last_good_vgpu_config() -> None:
    held = _node("failed", {})
    assert held.nodes[0].phase == rollout.ReportPhase.FAILED
    first = _node("failed", {}, on_failure="Rollback")
    failed = written(tuple(a for stage in first.stages for a in stage))
    back = _node("failed", {}, on_failure="Rollback", st=failed)  # the next pass
    actions = tuple(a for stage in back.stages for a in stage)
    assert written(actions).target.labels == {c.VGPU_CONFIG_LABEL: OLD.target}
    # requesting it clears the device manager's verdict on the failed config in the same patch
    assert labels_to_write(written(actions).target, _view("failed", {}, failed)) == {
        c.VGPU_CONFIG_LABEL: OLD.target,
        c.VGPU_CONFIG_STATE_LABEL: None,
    }
