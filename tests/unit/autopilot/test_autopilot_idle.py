"""The autopilot's recheck at node start (``cluster.autopilot_idle``, issue 29): a pod that
landed on a chosen GPU between the decision and the node's start is never evicted.

Raw Nodes and Pods go through the controller's own reading (``cluster.observe_pool`` with
the effective spec); the recorded choice changes GPU 3 of each H100 node (whole GPUs in Git)
to 1g.10gb x7. Pods hold GPUs 0-2 of each node; the GPU node agent runs on each.
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


def _world(nodes: list[N]) -> tuple[objects.PoolObservation, list[rollout.PodView]]:
    eff = pilot.effective(SPEC, CHOICE)
    git, chosen = _config(SPEC), _config(eff)
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
        name = (chosen if n.runs_choice else git)[0]
        raw.append(_node(n.name, config=name, held=held, read=READ))
    seen = objects.observe_pool(POOL, eff, raw, {}, None, dict([git, chosen]))
    return seen, [objects.pod_view(p) for p in pods]


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
    ],
)
def test_recheck(
    nodes: list[N], busy: dict[str, tuple[int, ...]], withdrawn: dict[int, Any]
) -> None:
    seen, found = _recheck(nodes)
    assert {b.node: b.gpus for b in found} == busy
    assert idle.withdrawable(found, seen.involved, sorted(seen.targets)) == withdrawn
    for b in found:
        assert "ml/late" in b.pods  # with the others when the whole node would be drained
        assert (f"GPU {b.node}/3 holds ml/late" in b.why) == bool(b.gpus), b.why


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
