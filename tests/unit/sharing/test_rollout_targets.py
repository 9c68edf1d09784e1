"""The bridge to the rollout engine: targets the engine can verify, and which nodes are cleared."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sharing_builders import gpu_node, npu_node, policy

from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain import rollout
from tessera.domain.rollout import NodeState, NodeView, Phase, TargetSpec
from tessera.domain.sharing import planning, rollout_targets
from tessera.domain.sharing.assignment import assign
from tessera.domain.sharing.rendering import result_of

LABEL = "nvidia.com/device-plugin.config"
MODE = rollout_targets.HAMI_MODE_LABEL
SOFT = {"softSlicing": True, "vDeviceCount": 4}
TEMPLATES = {"softSlicing": False}
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _state(owner: str, phase: Phase, **extra: object) -> NodeState:
    return NodeState(
        phase=phase, owner=owner, target=TargetSpec("t"), orig=False, since=NOW, **extra
    )  # type: ignore[arg-type]


def test_device_plugin_target_is_the_key_label_and_the_advertised_count() -> None:
    result = result_of(policy("p", "TimeSlicing", timeSlicing={"replicas": 4}))
    d = rollout_targets.desired_node(result, gpu_node("n1"))
    assert d.target == result.key
    assert d.labels == {LABEL: result.key}
    assert d.expected_allocatable == {"nvidia.com/gpu": 32}
    assert d.watch_label is None


def test_leaving_hami_removes_the_mode_label_only_when_it_is_there() -> None:
    result = result_of(policy("p", "MPS", mps={"replicas": 2}))
    marked = gpu_node("n1", labels={rollout_targets.HAMI_MODE_LABEL: "mig"})
    assert rollout_targets.desired_node(result, marked).labels == {
        LABEL: result.key,
        rollout_targets.HAMI_MODE_LABEL: None,
    }
    assert (
        rollout_targets.HAMI_MODE_LABEL
        not in rollout_targets.desired_node(result, gpu_node("n1")).labels
    )  # an absent label in the target would disable rollback snapshots


def test_hami_modes_differ_in_the_label_so_a_mode_switch_is_not_already_verified() -> None:
    core = result_of(policy("p", "HAMiCore", hamiCore={"mode": "TimeSlicing"}))
    mig = result_of(policy("p", "HAMiCore", hamiCore={"mode": "MIG"}))
    node = gpu_node("n1", labels={rollout_targets.HAMI_MODE_LABEL: "hami-core"})
    to_mig = rollout_targets.desired_node(mig, node)
    assert to_mig.labels == {rollout_targets.HAMI_MODE_LABEL: "mig"}
    assert to_mig.target != rollout_targets.desired_node(core, node).target
    view = NodeView("n1", labels=node.labels)
    decided = rollout.plan("SharingPolicy/p", RolloutSpec(), {"n1": to_mig}, [view], [], [], NOW)
    assert any(isinstance(a, rollout.Cordon) for a in decided.actions)


def test_cleared_means_drained_by_the_governing_policy_or_governed_by_none() -> None:
    policies = [policy("p", pool="a")]
    facts = [gpu_node(n, pool="a") for n in ("drained", "draining", "other", "rollback")]
    facts += [gpu_node("free", pool="b")]
    owner = rollout_targets.owner_id("p")
    views = [
        NodeView("drained", state=_state(owner, Phase.APPLYING)),
        NodeView("draining", state=_state(owner, Phase.DRAINING)),
        NodeView("other", state=_state("SharingPolicy/q", Phase.VERIFYING)),
        NodeView("rollback", state=_state(owner, Phase.APPLYING, rollback_of="x")),
        NodeView("free"),
    ]
    assert rollout_targets.cleared(assign(policies, facts), views) == {"drained", "free"}


def test_conflicted_nodes_are_not_cleared_and_stale_mode_labels_only_on_released_nodes() -> None:
    tied = [policy("p", pool="a"), policy("q", pool="a")]
    mark = {rollout_targets.HAMI_MODE_LABEL: "hami-core"}
    facts = {
        "held": gpu_node("held", pool="a", labels=mark),
        "gone": gpu_node("gone", pool="z", labels=mark),
    }
    assignment = assign(tied, facts.values())
    assert rollout_targets.cleared(assignment, [NodeView("held"), NodeView("gone")]) == {"gone"}
    assert rollout_targets.stale_mode_labels(assignment, facts) == ("gone",)


def test_a_released_mps_node_returns_to_the_default_when_cleared() -> None:
    mps = policy("p", "MPS", mps={"replicas": 4})
    first = planning.plan(
        [mps], planning.SharingObserved((gpu_node("n1"),)), cleared=frozenset({"n1"})
    )
    key = first.results["p"].key
    assert key is not None
    node = gpu_node("n1", pool="gone", config=key, applied=key)
    seen = planning.SharingObserved((node,), {key: first.results["p"].content or "", "default": ""})
    held = planning.plan([mps], seen)
    assert "n1" in held.awaiting_rollout and not held.device_plugin.labels  # held until cleared
    cleared = rollout_targets.cleared(assign([mps], [node]), [NodeView("n1")])
    released = planning.plan([mps], seen, cleared=cleared)
    assert [(c.node, c.new) for c in released.device_plugin.labels] == [("n1", "default")]


@pytest.mark.parametrize(
    ("ascend", "labels", "mode", "drains"),
    [
        pytest.param(TEMPLATES, {}, "vnpu-template", True, id="first-flip-to-templates"),
        pytest.param(
            TEMPLATES, {MODE: "hami-vnpu-core"}, "vnpu-template", True, id="soft-to-templates"
        ),
        pytest.param(SOFT, {MODE: "vnpu-template"}, "hami-vnpu-core", True, id="templates-to-soft"),
        pytest.param(
            TEMPLATES,
            {LABEL: "<key>"},  # what earlier versions wrote: the policy's key, for every flip
            "vnpu-template",
            True,
            id="device-plugin-label-left-by-an-earlier-flip",
        ),
        pytest.param(
            TEMPLATES, {MODE: "vnpu-template"}, "vnpu-template", False, id="already-templates"
        ),
    ],
)
def test_an_ascend_flip_targets_the_mode_label_so_every_flip_is_drained(
    ascend: dict[str, object], labels: dict[str, str], mode: str, drains: bool
) -> None:
    result = result_of(policy("p", "Exclusive", ascend=ascend))
    labels = {k: (result.key or "") if v == "<key>" else v for k, v in labels.items()}
    node = npu_node("a1", npus=2, labels=labels)
    d = rollout_targets.desired_node(result, node)
    assert d.labels == {MODE: mode}  # never the NVIDIA device-plugin label on an NPU node
    assert d.expected_allocatable == ({"huawei.com/Ascend310P": 8} if ascend is SOFT else None)
    alloc = {"huawei.com/Ascend310P": 8 if labels.get(MODE) == "hami-vnpu-core" else 2}
    view = NodeView("a1", labels=node.labels, allocatable=alloc)
    decided = rollout.plan("SharingPolicy/p", RolloutSpec(), {"a1": d}, [view], [], [], NOW)
    assert any(isinstance(a, rollout.Cordon) for a in decided.actions) is drains


def test_a_released_ascend_node_loses_its_mode_label() -> None:
    facts = {"a1": npu_node("a1", pool="z", labels={MODE: "vnpu-template"})}
    assignment = assign([policy("p", "Exclusive", ascend=SOFT)], facts.values())
    assert rollout_targets.stale_mode_labels(assignment, facts) == ("a1",)


def test_a_backend_switch_reverted_mid_drain_releases_the_node_at_once() -> None:
    """Issue 13, item 3: MPS -> TimeSlicing, back to MPS while the node drains."""
    mps = result_of(policy("p", "MPS", mps={"replicas": 2}))
    slicing = result_of(policy("p", "TimeSlicing", timeSlicing={"replicas": 4}))
    facts = gpu_node("n1", labels={LABEL: mps.key or ""})
    draining = NodeState(
        phase=Phase.DRAINING,
        owner="SharingPolicy/p",
        target=TargetSpec(slicing.key or "", {LABEL: slicing.key}),
        orig=False,
        since=NOW,
        drain_started=NOW,
    )
    view = NodeView(
        "n1",
        labels=facts.labels,
        unschedulable=True,
        allocatable={"nvidia.com/gpu": 16},  # MPS x2 on 8 GPUs, still live
        taints=(rollout.GEOMETRY_PENDING,),
        state=draining,
    )
    serving = rollout.PodView("ml", "serve", "n1", requests_accelerator=True, uid="u1")
    back = {"n1": rollout_targets.desired_node(mps, facts)}
    decided = rollout.plan("SharingPolicy/p", RolloutSpec(), back, [view], [serving], [], NOW)
    kinds = [type(a).__name__ for a in decided.actions]
    assert kinds == ["SetNodeState", "RemoveTaint", "Uncordon", "ClearNodeState"], kinds
    assert decided.verdict.state == "ready"
