"""The autopilot's pass (``cluster.autopilot``): a pool's status choice, pass after pass.

Raw Nodes and Pods go through the controller's own reading (``cluster.observe_pool`` with
the effective spec, then ``cluster.autopilot.step``); each pass's status is the next one's
``last``, as the controller writes it and reads it back. An 8-GPU H100 node at whole GPUs,
three of them held by pods; pods pend for 1g.10gb.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from live_builders import NOW, POOL, WHOLE
from live_builders import config as _config
from live_builders import node as _node
from live_builders import pod as _pod

from tessera.api.v1alpha1.autopilot import AutopilotStatus
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.cluster import autopilot as pilot
from tessera.domain.cluster import objects
from tessera.domain.geometry import layouts

BUSY = [_pod(f"busy-{i}", "nvidia.com/gpu", node="n-0") for i in range(3)]
HELD = {f"ml/busy-{i}": [i] for i in range(3)}
BOUNDS = {"H100-80GB": {"1g.10gb": {}, "7g.80gb": {}}}


def _spec(**auto: Any) -> NodePoolGeometrySpec:
    body = {
        **WHOLE,
        "mig": {"layouts": [{"devices": "all", "profiles": {}}]},
        "autopilot": {"profiles": BOUNDS, "pendingFor": "5m", **auto},
    }
    return NodePoolGeometrySpec.model_validate(body)


def _wanting(n: int, pended: timedelta = timedelta(minutes=10)) -> list[dict[str, Any]]:
    return [_pod(f"want-{i}", pended=pended) for i in range(n)]


def _pass(
    spec: NodePoolGeometrySpec,
    last: AutopilotStatus | None,
    pods: list[dict[str, Any]],
    *,
    runs: NodePoolGeometrySpec | None = None,
    held: dict[str, list[int]] | None = None,
    days: int = 0,
) -> pilot.Step:
    """One pass: the node runs ``runs``'s layout (default: what the rollout targets)."""
    eff = pilot.effective(spec, last)
    name, text = _config(runs or eff)
    configs = {name: text, **dict([_config(eff)])}
    record = HELD if held is None else held
    node = _node("n-0", config=name, held=record, read=NOW + timedelta(days=days))
    seen = objects.observe_pool(POOL, eff, [node], {}, None, configs)
    running = [_running(ref, [*BUSY, *pods]) for ref in record]
    return pilot.step(POOL, spec, last, seen, [*running, *pods], NOW + timedelta(days=days))


def _running(ref: str, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod the record places: a busy one as it is, a pending one bound to n-0 now."""
    name = ref.split("/", 1)[1]
    for pod in pods:
        if pod["metadata"]["name"] == name and pod["spec"].get("nodeName"):
            return pod
    resource = next(
        (
            next(iter(p["spec"]["containers"][0]["resources"]["limits"]))
            for p in pods
            if p["metadata"]["name"] == name
        ),
        "nvidia.com/gpu",
    )
    return _pod(name, resource, node="n-0")


def _changed(status: AutopilotStatus) -> dict[str, dict[str, int]]:
    return {str(lay.devices): dict(lay.profiles) for lay in status.layouts}


def _per_gpu(status: AutopilotStatus) -> list[dict[str, int]]:
    pairs = [(lay.devices, lay.profiles) for lay in status.layouts]
    return [dict(c) for c in layouts.per_device(pairs, 8)]


def test_pending_pods_make_an_idle_gpu_change_recorded_in_status_only() -> None:
    spec = _spec()
    step = _pass(spec, None, _wanting(7))
    assert step.status is not None and step.status.outcome == pilot.CHANGED
    assert step.announce and step.profiles == ("1g.10gb",)
    assert _changed(step.status) == {"all": {}, "3": {"1g.10gb": 7}}  # GPUs 0-2 hold pods
    assert [(r.gpu, r.count) for r in step.status.reconfigurations] == [(3, 1)]
    assert step.status.day == NOW.date().isoformat()
    assert step.condition == ("Autopilot", "True", "Changed", step.status.reason)
    assert step.status.reason.startswith("7 pods want 1g.10gb for 10 min; GPU 3 is idle")
    assert step.requeue_after is not None  # the next pass rolls it out
    # the rollout targets Git's spec with the choice in place of its layouts; Git's is unchanged
    eff = pilot.effective(spec, step.status)
    assert eff.mig is not None and spec.mig is not None
    assert [lay.profiles for lay in eff.mig.layouts] == [{}, {"1g.10gb": 7}]
    assert [lay.profiles for lay in spec.mig.layouts] == [{}]


def test_while_the_change_rolls_out_nothing_more_is_decided_or_announced() -> None:
    spec = _spec()
    first = _pass(spec, None, _wanting(7)).status
    rolling = _pass(spec, first, _wanting(7), runs=spec)  # the node still runs Git's layout
    assert rolling.status is not None and rolling.status.outcome == pilot.UNKNOWN
    assert not rolling.announce
    assert first is not None and rolling.status.layouts == first.layouts
    assert "does not run the pool's layout yet" in rolling.status.reason


def test_hysteresis_demand_gone_and_back_within_the_window_changes_nothing() -> None:
    """The flap nos makes: demand goes, the layout stays; it comes back, the free instances
    the first change made serve it; the GPU changed today cannot change again today."""
    spec = _spec()
    changed = _pass(spec, None, _wanting(7)).status
    assert changed is not None
    placed = {f"ml/want-{i}": [3] for i in range(7)}
    gone = _pass(spec, changed, [], held={**HELD, **placed})  # served: the 7 run on GPU 3
    assert gone.status is not None and gone.status.outcome == pilot.IDLE
    assert gone.status.layouts == changed.layouts and gone.announce
    idle = _pass(spec, gone.status, [])  # the 7 ended: GPU 3's instances are free
    assert idle.status == gone.status and not idle.announce  # nothing written, nothing said
    back = _pass(spec, idle.status, _wanting(7, timedelta(minutes=1)))
    assert back.status is not None and back.status.outcome == pilot.WAITING
    assert back.requeue_after == pytest.approx(240)
    counted = _pass(spec, back.status, _wanting(7))
    assert counted.status is not None and counted.status.outcome == pilot.SERVED
    assert counted.status.layouts == changed.layouts
    assert counted.status.reconfigurations == changed.reconfigurations
    # whole GPUs wanted now: the idle GPUs never changed serve them, GPU 3 (changed) keeps its 1g
    whole = [_pod(f"w-{i}", "nvidia.com/mig-7g.80gb") for i in range(5)]
    today = _pass(spec, counted.status, whole)
    assert today.status is not None and today.status.outcome == pilot.CHANGED
    per_gpu = _per_gpu(today.status)
    assert per_gpu[3] == {"1g.10gb": 7}
    assert per_gpu[:3] == [{}, {}, {}]  # busy
    assert per_gpu[4:] == [{"7g.80gb": 1}] * 4  # 4 of 5 wanted fit: GPU 3 may not change today


def test_the_daily_limit_holds_a_changed_gpu_until_the_next_day() -> None:
    spec = _spec()
    held = {**HELD, **{f"ml/x-{i}": [i] for i in range(4, 8)}}  # only GPU 3 is idle
    first = _pass(spec, None, _wanting(7), held=held).status
    assert first is not None and _changed(first) == {"all": {}, "3": {"1g.10gb": 7}}
    whole = [_pod("w-0", "nvidia.com/mig-7g.80gb")]
    same_day = _pass(spec, first, whole, held=held)
    assert same_day.status is not None and same_day.status.outcome == pilot.NOTHING_FITS
    assert "reconfigurationsPerGpuPerDay" in same_day.status.reason
    next_day = _pass(spec, first, whole, held=held, days=1)
    assert next_day.status is not None and next_day.status.outcome == pilot.CHANGED
    assert _changed(next_day.status)["3"] == {"7g.80gb": 1}
    assert [(r.gpu, r.count) for r in next_day.status.reconfigurations] == [(3, 1)]


def test_off_records_no_choice_and_git_rules() -> None:
    on = _pass(_spec(), None, _wanting(7)).status
    off = _spec(enabled=False)
    step = _pass(off, on, _wanting(7))
    assert step.status is not None and step.status.outcome == pilot.OFF
    assert step.status.layouts == [] and step.condition is not None
    assert step.condition[:3] == ("Autopilot", "False", "Off")
    assert pilot.effective(off, on) == off


def test_a_change_of_gits_layouts_drops_the_choice() -> None:
    chosen = _pass(_spec(), None, _wanting(7)).status
    git = NodePoolGeometrySpec.model_validate(
        {
            **_spec().model_dump(by_alias=True, exclude_none=True),
            "mig": {"layouts": [{"profiles": {"3g.40gb": 2}}]},
        }
    )
    assert pilot.effective(git, chosen) == git


def test_a_model_the_bounds_do_not_name_is_a_condition_naming_it() -> None:
    spec = _spec(profiles={"A100-80GB": {"1g.10gb": {}}})
    step = _pass(spec, None, _wanting(7))
    assert step.status is not None and step.status.outcome == pilot.INVALID
    assert step.condition is not None and step.condition[1] == "False"
    assert "no entry for H100-80GB, the GPU model of the pool's nodes (n-0)" in step.condition[3]
    assert step.status.layouts == []


def test_a_pod_asking_for_a_profile_the_model_lacks_is_a_condition_naming_it() -> None:
    step = _pass(_spec(), None, [_pod("odd", "nvidia.com/mig-1g.12gb")])
    assert step.status is not None and step.status.outcome == pilot.INVALID
    assert "pod ml/odd asks for nvidia.com/mig-1g.12gb" in step.status.reason


def test_the_maximum_bounds_the_change() -> None:
    spec = _spec(profiles={"H100-80GB": {"1g.10gb": {"max": 7}, "7g.80gb": {}}})
    step = _pass(spec, None, _wanting(20))
    assert step.status is not None and step.status.outcome == pilot.CHANGED
    total = sum(p.get("1g.10gb", 0) for p in _changed(step.status).values())
    assert total == 7
    assert "maximum[1g.10gb] is 7" in step.status.reason


def test_without_the_bounds_nothing_is_recorded() -> None:
    spec = NodePoolGeometrySpec.model_validate(
        {**WHOLE, "mig": {"layouts": [{"devices": "all", "profiles": {}}]}}
    )
    assert _pass(spec, None, _wanting(7)).status is None


def test_demanding_reads_only_unschedulable_pods_asking_for_a_profile() -> None:
    assert pilot.demanding(_wanting(1))
    assert not pilot.demanding(BUSY)
    assert not pilot.demanding([_pod("gpu", "nvidia.com/gpu")])
    assert not pilot.demanding([_pod("gated", reason="SchedulingGated")])


def test_from_status_the_choice_becomes_a_spec_patch_and_then_gits_own() -> None:
    """``tessera suggest --from-status``: committed, the patch gives Git the very layouts the
    pool runs, and the choice, made from Git's old layouts, is dropped: nothing rolls."""
    spec = _spec()
    chosen = _pass(spec, None, _wanting(7)).status
    assert chosen is not None
    patch = pilot.spec_patch(chosen)
    assert patch == {"spec": {"mig": {"layouts": [
        {"devices": "all", "profiles": {}},
        {"devices": "3", "profiles": {"1g.10gb": 7}},
    ]}}}  # fmt: skip
    body = spec.model_dump(by_alias=True, exclude_none=True)
    body["mig"] = patch["spec"]["mig"]
    committed = NodePoolGeometrySpec.model_validate(body)
    assert pilot.chosen(committed, chosen) == ()
    assert pilot.effective(committed, chosen).mig == pilot.effective(spec, chosen).mig
    assert pilot.spec_patch(AutopilotStatus()) is None


CHOSEN = {
    "layouts": [{"devices": "all", "profiles": {}}, {"devices": "3", "profiles": {"1g.10gb": 7}}],
    "basis": pilot.basis(_spec()),
    "outcome": pilot.CHANGED,
    "reason": "7 pods want 1g.10gb for 10 min",
    "decidedAt": "2026-12-07T11:00:00Z",
    "day": NOW.date().isoformat(),
    "reconfigurations": [{"gpu": 3, "count": 1}],
}


@pytest.mark.parametrize(
    ("status", "readable", "applies", "gpu"),
    [
        pytest.param(
            {"autopilot": CHOSEN}, True, True, 3, id="made from Git's layouts now: applies"
        ),
        pytest.param(
            {"autopilot": {**CHOSEN, "basis": "0123456789abcdef"}},
            True,
            False,
            4,  # GPU 3's change today still counts: the day's limit outlives the choice
            id="stale: made from Git's old layouts, dropped",
        ),
        pytest.param(
            {"autopilot": {**CHOSEN, "layouts": "all"}},
            False,
            False,
            3,
            id="unreadable: Git rules",
        ),
        pytest.param(
            {"autopilot": {**CHOSEN, "reconfigurations": [{"gpu": 99, "count": 1}]}},
            False,
            False,
            3,
            id="out of range: Git rules",
        ),
        pytest.param({}, False, False, 3, id="none recorded"),
    ],
)
def test_a_recorded_choice_applies_only_while_made_from_gits_layouts(
    status: dict[str, Any], readable: bool, applies: bool, gpu: int
) -> None:
    spec = _spec()
    last = pilot.recorded(status)
    assert (last is not None) == readable
    assert bool(pilot.chosen(spec, last)) == applies
    eff = pilot.effective(spec, last)
    assert (eff != spec) == applies
    step = _pass(spec, last, _wanting(7))  # the node runs what the rollout targets
    assert step.status is not None
    if applies:  # the choice serves the 7: nothing new is chosen, its layouts stay
        assert step.status.layouts == (last.layouts if last else [])
    else:  # decided afresh from Git's layouts, recorded with their basis
        assert step.status.outcome == pilot.CHANGED and step.announce
        assert step.status.basis == pilot.basis(spec)
        assert _changed(step.status) == {"all": {}, str(gpu): {"1g.10gb": 7}}
        counts = [(r.gpu, r.count) for r in step.status.reconfigurations]
        assert counts == sorted({(3, 1), (gpu, 1)} if readable else {(gpu, 1)})
