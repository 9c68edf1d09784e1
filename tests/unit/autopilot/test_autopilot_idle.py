"""The autopilot's recheck (``cluster.autopilot_idle``, issue 29): a pod that landed on a
chosen GPU between the decision and the node's change is never evicted — whether the node
has not started yet, or the rollout cordoned it before the pod was in its cache.

Raw Nodes and Pods go through the controller's own reading (``cluster.observe_pool`` with
the effective spec); the recorded choice changes GPU 3 of each H100 node (whole GPUs in Git)
to 1g.10gb x7. Pods hold GPUs 0-2 of each node; the GPU node agent runs on each. A node
``started`` carries the record, cordon and taint the rollout's own plan wrote for it while
the late pods were not yet seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from live_builders import NOW, POOL, WHOLE
from live_builders import config as _config
from live_builders import node as _node
from live_builders import pod as _pod

from tessera.api import constants as c
from tessera.api.v1alpha1.autopilot import AutopilotStatus
from tessera.api.v1alpha1.common import DrainSpec, RolloutSpec
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain import rollout
from tessera.domain.cluster import autopilot as pilot
from tessera.domain.cluster import autopilot_idle as idle
from tessera.domain.cluster import objects
from tessera.domain.geometry import layouts
from tessera.domain.rollout import actions as act
from tessera.domain.rollout import state as node_state

SPEC = NodePoolGeometrySpec.model_validate(
    {
        **WHOLE,
        "mig": {"layouts": [{"devices": "all", "profiles": {}}]},
        "autopilot": {"profiles": {"H100-80GB": {"1g.10gb": {}, "7g.80gb": {}}}},
    }
)
CHOICE = AutopilotStatus.model_validate(
    {
        "layouts": [
            {"devices": "all", "profiles": {}},
            {"devices": "3", "profiles": {"1g.10gb": 7}},
        ],
        "basis": pilot.basis(SPEC),
        "outcome": pilot.CHANGED,
        "reason": "7 pods want 1g.10gb for 10 min; GPU 3 is idle on each of the 2 node(s)",
        "decidedAt": "2026-12-07T11:59:00Z",
        "day": NOW.date().isoformat(),
        "reconfigurations": [{"gpu": 3, "count": 1}],
    }
)
READ = NOW - timedelta(seconds=30)
OWNER = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "late",
    "uid": "u",
    "controller": True,
}


@dataclass
class N:
    """One node of the pool: what it runs, the pods on it and where its record places them."""

    name: str
    runs_choice: bool = False  # the node runs the choice already (its change done)
    late: dict[str, list[int]] = field(default_factory=dict)  # pods that came after the choice
    late_after_read: bool = False  # they came after the record was read: it does not place them
    started: bool = False  # the rollout cordoned it for the choice before the late pods came
    gpus: int = 8
    layout_known: bool = True  # its MIG config label names a config mig-parted's map has


def _world(
    nodes: list[N], choice: AutopilotStatus = CHOICE
) -> tuple[objects.PoolObservation, list[rollout.PodView]]:
    eff = pilot.effective(SPEC, choice)
    git, chosen = _config(SPEC), _config(eff)
    started = _started(nodes, choice) if any(n.started for n in nodes) else {}
    raw, pods = [], []
    for n in nodes:
        held = {f"ml/{n.name}-busy-{i}": [i] for i in range(3)}
        pods += [_pod(f"{n.name}-busy-{i}", "nvidia.com/gpu", node=n.name) for i in range(3)]
        agent = _pod(f"{n.name}-agent", "cpu", node=n.name)
        agent["metadata"]["labels"] = {c.COMPONENT_LABEL: c.GPU_AGENT_COMPONENT}
        pods.append(agent)
        for ref, gpus in n.late.items():
            created = READ + timedelta(seconds=5) if n.late_after_read else READ - timedelta(1)
            late = _pod(ref, "nvidia.com/gpu", node=n.name, created=created)
            late["metadata"]["ownerReferences"] = [OWNER]  # a Deployment's: it comes back
            pods.append(late)
            if not n.late_after_read:
                held[f"ml/{ref}"] = gpus
        name = (chosen if n.runs_choice else git)[0] if n.layout_known else "hand-made"
        raw.append(_node(n.name, config=name, held=held, read=READ, gpus=n.gpus))
        if n.name in started:
            raw[-1]["metadata"]["annotations"][c.NODE_STATE_ANNOTATION] = node_state.encode(
                started[n.name]
            )
            taint = {"key": c.GEOMETRY_PENDING_TAINT, "effect": "NoSchedule"}
            raw[-1]["spec"] = {"unschedulable": True, "taints": [taint]}
    seen = objects.observe_pool(POOL, eff, raw, {}, None, dict([git, chosen]))
    return seen, [objects.pod_view(p) for p in pods]


def _started(nodes: list[N], choice: AutopilotStatus) -> dict[str, node_state.NodeState]:
    """The records the rollout's own plan writes as it starts the ``started`` nodes, from the
    pool as it was before the late pods (none of them in its cache)."""
    early = [N(n.name, runs_choice=n.runs_choice, gpus=n.gpus) for n in nodes]
    seen, pods = _world(early, choice)
    policy = RolloutSpec.model_validate({"maxUnavailable": len(nodes)})
    plan = rollout.plan(seen.owner, policy, seen.desired, seen.involved, pods, [], READ)
    wanted = {n.name for n in nodes if n.started}
    found = {
        a.node: a.state
        for a in plan.actions
        if isinstance(a, act.SetNodeState) and a.node in wanted
    }
    assert set(found) == wanted and all(
        s.phase == node_state.Phase.CORDONED for s in found.values()
    )
    return found


def _recheck(nodes: list[N]) -> tuple[objects.PoolObservation, tuple[idle.Busy, ...]]:
    seen, pods = _world(nodes)
    return seen, idle.recheck(seen.owner, seen.desired, seen.involved, pods, DrainSpec())


@pytest.mark.parametrize(
    ("nodes", "busy", "withdrawn"),
    [
        pytest.param([N("n-0"), N("n-1")], {}, {}, id="the chosen GPUs still idle: none busy"),
        pytest.param(
            [N("n-0", late={"late": [4]}), N("n-1")], {}, {}, id="a pod on a GPU that stays"
        ),
        pytest.param(
            [N("n-0", late={"late": [3]}), N("n-1")],
            {"n-0": (3,)},
            {3: ()},
            id="a pod on the chosen GPU, no node runs the choice: withdrawn",
        ),
        pytest.param(
            [N("n-0", late={"late": [3]}), N("n-1", runs_choice=True)],
            {"n-0": (3,)},
            {},
            id="another node runs the choice already: the busy node waits",
        ),
        pytest.param(
            [N("n-0", late={"late": [3]}, late_after_read=True), N("n-1")],
            {"n-0": ()},
            {},
            id="the record does not place the pod yet: the node waits",
        ),
        pytest.param(
            [N("n-0", runs_choice=True, late={"late": [3]})],
            {},
            {},
            id="a node at the choice changes nothing: not rechecked",
        ),
        pytest.param(
            [N("n-0", started=True, late={"late": [3]}), N("n-1")],
            {"n-0": (3,)},
            {3: ()},
            id="cordoned before the pod was seen: rechecked, withdrawn",
        ),
        pytest.param(
            [N("n-0", started=True, late={"late": [4]}), N("n-1")],
            {},
            {},
            id="cordoned, the late pod on a GPU that stays: it goes on",
        ),
        pytest.param(
            [N("n-0", started=True, late={"late": [3]}, late_after_read=True), N("n-1")],
            {"n-0": ()},
            {},
            id="cordoned, the record does not place the late pod: the node waits",
        ),
        pytest.param(
            [N("n-0", late={"late": [3]}), N("n-1", layout_known=False)],
            {"n-0": (3,), "n-1": ()},
            {},
            id="a node of unknown layout under a choice: held whole, nothing withdrawn",
        ),
        pytest.param(
            [N("n-0", gpus=4, late={"late": [3]}), N("n-1")],
            {"n-0": (3,)},
            {3: ()},
            id="unlike nodes: the smaller one's busy GPU is withdrawn",
        ),
    ],
)
def test_recheck(
    nodes: list[N], busy: dict[str, tuple[int, ...]], withdrawn: dict[int, Any]
) -> None:
    seen, found = _recheck(nodes)
    assert {b.node: b.gpus for b in found} == busy
    assert idle.withdrawable(found, seen.involved, sorted(seen.targets)) == withdrawn
    started = {n.name for n in nodes if n.started}
    for b in found:
        late = next(n for n in nodes if n.name == b.node).late
        assert b.started == (b.node in started)
        if late:
            assert "ml/late" in b.pods  # with the others when the whole node would be drained
            (gpu,) = late["late"]
            assert (f"GPU {b.node}/{gpu} holds ml/late" in b.why) == bool(b.gpus), b.why


def test_a_busy_gpu_withdraws_the_choice_with_an_event_naming_node_and_gpu() -> None:
    seen, found = _recheck([N("n-0", late={"late": [3]}), N("n-1")])
    step = pilot.step(POOL, SPEC, CHOICE, seen, [], NOW, found)
    assert step.status is not None and step.status.outcome == pilot.BUSY
    assert step.announce  # an Event: the reason names node and GPU
    assert step.status.reason.startswith("GPU n-0/3 holds ml/late since the choice")
    assert "its choice for GPU 3 is withdrawn, and it decides again" in step.status.reason
    pairs = [(lay.devices, lay.profiles) for lay in step.status.layouts]
    assert [dict(x) for x in layouts.per_device(pairs, 8)] == [{}] * 8  # back to what runs
    assert [(r.gpu, r.count) for r in step.status.reconfigurations] == [(3, 1)]  # still spent
    assert step.requeue_after is not None  # decide again soon
    assert step.condition == ("Autopilot", "True", pilot.BUSY, step.status.reason)


def test_a_node_whose_record_lags_waits_and_the_choice_stays() -> None:
    seen, found = _recheck([N("n-0", late={"late": [3]}, late_after_read=True), N("n-1")])
    step = pilot.step(POOL, SPEC, CHOICE, seen, [], NOW, found)
    assert step.status is not None and step.status.outcome == pilot.BUSY
    assert step.status.layouts == CHOICE.layouts
    assert step.status.reason.endswith("n-0 wait(s) until the GPUs are idle")
    again = pilot.step(POOL, SPEC, step.status, seen, [], NOW + timedelta(seconds=9), found)
    assert not again.announce and again.status == step.status  # no Event pass after pass


def test_the_rollout_does_not_start_a_held_node_and_evicts_nothing() -> None:
    seen, pods = _world([N("n-0", late={"late": [3]}), N("n-1")])
    found = idle.recheck(seen.owner, seen.desired, seen.involved, pods, DrainSpec())
    policy = RolloutSpec.model_validate({"maxUnavailable": 2})
    args = (seen.owner, policy, seen.desired, seen.involved, pods, [], NOW)
    free = rollout.plan(*args)
    assert {r.name: r.phase for r in free.nodes}["n-0"] == rollout.ReportPhase.CORDONED
    held = rollout.plan(*args, hold=idle.hold(found))
    phases = {r.name: (r.phase, r.message) for r in held.nodes}
    assert phases["n-0"][0] == rollout.ReportPhase.PENDING
    assert "the autopilot changes idle GPUs only" in phases["n-0"][1]
    assert phases["n-1"][0] == rollout.ReportPhase.CORDONED  # the idle one goes on
    touched = {getattr(a, "node", None) for a in held.actions}
    assert "n-0" not in touched


CHOICE_6 = AutopilotStatus.model_validate(
    {
        **CHOICE.model_dump(by_alias=True),
        "layouts": [
            {"devices": "all", "profiles": {}},
            {"devices": "6", "profiles": {"1g.10gb": 7}},
        ],
        "reconfigurations": [{"gpu": 6, "count": 1}],
    }
)


@pytest.mark.parametrize(
    ("nodes", "gpus", "held", "said"),
    [
        pytest.param(
            [N("n-0", gpus=4), N("n-1", late={"late": [6]})],
            (6,),
            [],
            "its choice for GPU 6 is withdrawn, and it decides again",
            id="unlike nodes: GPU 6, which the first node lacks, is withdrawn",
        ),
        pytest.param(
            [N("n-0", layout_known=False), N("n-1", late={"late": [6]})],
            (),
            ["n-0", "n-1"],
            "n-0, n-1 wait(s) until the GPUs are idle",
            id="a member's layout not known: nothing withdrawn, no word of it",
        ),
    ],
)
def test_a_withdrawal_is_read_per_node_and_said_only_when_it_is_one(
    nodes: list[N], gpus: tuple[int, ...], held: list[str], said: str
) -> None:
    seen, found = _world(nodes, CHOICE_6)
    busy = idle.recheck(seen.owner, seen.desired, seen.involved, found, DrainSpec())
    out = pilot.withdrawal(CHOICE_6.layouts, busy, seen)
    assert out.gpus == gpus
    step = pilot.step(POOL, SPEC, CHOICE_6, seen, [], NOW, busy)
    assert step.status is not None and step.status.outcome == pilot.BUSY
    assert said in step.status.reason
    assert ("withdrawn" in step.status.reason) == bool(gpus)
    assert step.requeue_after == (pilot.DECIDE_AGAIN_S if gpus else None)  # no pass loop
    pairs = [(lay.devices, lay.profiles) for lay in step.status.layouts]
    per_gpu = [dict(x) for x in layouts.per_device(pairs, 8)]
    assert per_gpu[6] == ({} if gpus else {"1g.10gb": 7})
    if held:
        assert step.status.held == held


def test_a_node_cordoned_before_a_late_pod_was_seen_is_backed_out_never_drained() -> None:
    """The rollout cordoned n-0 for the choice while the pod cache did not hold ml/late yet
    (bound just before the cordon). Its next step would drain the pod; under a choice the
    node is backed out instead — its record, cordon and taint lifted — and nothing is
    evicted; n-1, idle, goes on."""
    seen, pods = _world([N("n-0", started=True, late={"late": [3]}), N("n-1", started=True)])
    policy = RolloutSpec.model_validate({"maxUnavailable": 2})
    args = (seen.owner, policy, seen.desired, seen.involved, pods, [], NOW)
    drained = rollout.plan(*args)  # what the rollout did before the recheck covered it
    assert any(isinstance(a, act.Evict) and a.node == "n-0" for a in drained.actions)
    found = idle.recheck(seen.owner, seen.desired, seen.involved, pods, DrainSpec())
    assert [(b.node, b.gpus, b.started) for b in found] == [("n-0", (3,), True)]
    held = rollout.plan(*args, hold=idle.hold(found))
    assert not [a for a in held.actions if isinstance(a, (act.Evict, act.DeletePod))]
    on_0 = {type(a) for a in held.actions if getattr(a, "node", None) == "n-0"}
    assert {act.Uncordon, act.RemoveTaint, act.ClearNodeState} <= on_0
    assert act.SetNodeLabels not in on_0
    phases = {r.name: (r.phase, r.message) for r in held.nodes}
    assert phases["n-0"][0] == rollout.ReportPhase.PENDING
    assert phases["n-0"][1].startswith("backed out: GPU n-0/3 holds ml/late since the choice")
    assert phases["n-1"][0] == rollout.ReportPhase.VERIFYING  # drained of nothing, applied
    assert held.summary.pods_to_evict == 0


def test_busy_is_one_decision_whichever_pods_hold_the_gpu() -> None:
    """A Deployment replaces the pod that holds the waiting node's GPU: other names, the same
    decision — no second Event; another node waiting is a new one."""
    one = [N("n-0", late={"late": [3]}, late_after_read=True), N("n-1")]
    seen, found = _recheck(one)
    first = pilot.step(POOL, SPEC, CHOICE, seen, [], NOW, found)
    assert first.announce and first.status is not None and first.status.held == ["n-0"]
    renamed = [N("n-0", late={"late-2": [3]}, late_after_read=True), N("n-1")]
    seen, found = _recheck(renamed)
    assert found[0].pods != ("ml/late",)
    again = pilot.step(POOL, SPEC, first.status, seen, [], NOW + timedelta(minutes=1), found)
    assert not again.announce and again.status == first.status
    both = [N("n-0", late={"late": [3]}, late_after_read=True)]
    both.append(N("n-1", late={"late-1": [3]}, late_after_read=True))
    seen, found = _recheck(both)
    grown = pilot.step(POOL, SPEC, first.status, seen, [], NOW + timedelta(minutes=2), found)
    assert grown.announce and grown.status is not None and grown.status.held == ["n-0", "n-1"]
