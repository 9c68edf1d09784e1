"""volcano.plan: one row per state of the module's table, and the restart arithmetic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builders import PodWrapper
from tessera.api.v1alpha1.scheduler import SchedulerSpec
from tessera.api.v1alpha1.sharingpolicy import HamiCore
from tessera.domain.schedulers.demands import ObjectKey, PolicyDemand, VolcanoDemand
from tessera.domain.schedulers.versions import Detected, Version
from tessera.domain.schedulers.volcano import conf as v
from tessera.domain.schedulers.volcano import plan as vp
from tessera.domain.schedulers.volcano import restart as r

CONF = "tiers:\n- plugins:\n  - name: predicates  # keep\n  - name: proportion\n"
KEY = ObjectKey("volcano-system", "volcano-scheduler-configmap")
DEPLOY = ObjectKey("volcano-system", "volcano-scheduler")
ENTRY = {"chipName": "310P3", "commonWord": "Ascend310P", "memoryFactor": 1, "templates": []}


def policy(
    name: str = "npu",
    *,
    version: str = "v1.16.0",
    soft: bool = False,
    chips: tuple[str, ...] = ("310P3",),
    **volcano: Any,
) -> PolicyDemand:
    spec = SchedulerSpec.model_validate({"name": "Volcano", "volcano": {"weight": 10, **volcano}})
    found = Version(*(int(x) for x in version.lstrip("v").split(".")))
    return PolicyDemand(
        name, spec, chips, soft, None, {"volcano": Detected(found, "image")}, ascend=True
    )


def demand(*policies: PolicyDemand, deployment: bool = True) -> VolcanoDemand:
    return VolcanoDemand(KEY, policies, {DEPLOY: {"spec": {}} if deployment else None})


@pytest.mark.parametrize(
    ("given", "conf", "states"),
    [
        # nothing of Volcano's there: wait, write nothing
        (demand(policy()), None, {"npu": ("progressing", "WaitingForScheduler")}),
        (demand(policy(), deployment=False), CONF, {"npu": ("progressing", "WaitingForScheduler")}),
        # two policies ask different things of one scheduler: both stalled
        (
            demand(policy("a"), policy("b", policy="spread")),
            CONF,
            {"a": ("stalled", "Conflict"), "b": ("stalled", "Conflict")},
        ),
        (
            demand(policy("a"), policy("b", weight=20)),
            CONF,
            {"a": ("stalled", "Conflict"), "b": ("stalled", "Conflict")},
        ),
        # two versions declared for one Volcano: not the oldest silently (as HAMi's part)
        (
            demand(policy("a"), policy("b", version="v1.15.0")),
            CONF,
            {"a": ("stalled", "Conflict"), "b": ("stalled", "Conflict")},
        ),
        # one restarts Volcano, the other leaves it to a person: never silently Automatic
        (
            demand(policy("a"), policy("b", restart="Automatic")),
            CONF,
            {"a": ("stalled", "Conflict"), "b": ("stalled", "Conflict")},
        ),
        # a conf that does not parse: untouched
        (demand(policy()), "tiers: [\n", {"npu": ("stalled", "SchedulerConfigInvalid")}),
        # traps that leave pods Pending
        (demand(policy(version="v1.15.0", soft=True)), CONF, {"npu": ("stalled", "SchedulerTrap")}),
        (demand(policy(chips=("910B4",))), CONF, {"npu": ("stalled", "SchedulerTrap")}),
        # fine; a warning trap keeps it ready
        (demand(policy()), CONF, {"npu": ("ready", "Applied")}),
        (demand(policy(weight=0)), CONF, {"npu": ("ready", "Applied")}),
        (
            demand(policy("a"), policy("b")),
            CONF,
            {"a": ("ready", "Applied"), "b": ("ready", "Applied")},
        ),
    ],
)
def test_states(given: VolcanoDemand, conf: str | None, states: dict[str, tuple[str, str]]) -> None:
    found = vp.plan(given, conf, {"310P3": ENTRY}, {})
    assert {n: (x.state, x.reason) for n, x in found.verdicts.items()} == states
    writes = all(s == "ready" or r == "SchedulerTrap" for s, r in states.values())
    assert (found.conf is not None) is writes
    assert (found.geometries is not None) is writes


def test_keys_volcano_ignores_are_a_warning() -> None:
    entry = {**ENTRY, "memoryFactor": 2}
    found = vp.plan(demand(policy()), CONF, {"310P3": entry}, {})
    assert found.verdicts["npu"].state == "ready"
    assert "310P3.memoryFactor=2" in found.verdicts["npu"].message
    assert any("memoryFactor" in w for w in found.warnings["npu"])


def test_conflict_names_both_policies() -> None:
    found = vp.plan(demand(policy("a"), policy("b", policy="spread")), CONF, {}, {})
    assert "SharingPolicy a asks binpack weight 10" in found.verdicts["b"].message
    assert "SharingPolicy b asks spread" in found.verdicts["a"].message


def test_invalid_conf_says_where() -> None:
    found = vp.plan(demand(policy()), "tiers:\n- plugins: [\n", {}, {})
    assert "line 3, column 1" in found.verdicts["npu"].message
    assert "left untouched" in found.verdicts["npu"].message


def test_missing_hami_map_waits() -> None:
    found = vp.plan(
        demand(policy()), CONF, {}, {}, "HAMi's ConfigMap kube-system/hami-scheduler-device"
    )
    assert found.verdicts["npu"].reason == "WaitingForScheduler" and found.conf is None


def test_write_records_previous_values_and_release_restores_them() -> None:
    conf = v.edit(CONF, {v.POLICY: "spread"})  # a person's deviceshare, before Tessera
    found = vp.plan(demand(policy()), conf, {"310P3": ENTRY}, {})
    assert found.conf is not None
    assert v.arguments(found.conf)[v.POLICY] == "binpack"
    assert found.previous[v.POLICY] == "spread" and found.previous[v.CM_NAME] is None
    released = vp.plan(VolcanoDemand(KEY, ()), found.conf, {}, found.previous)
    assert released.conf is not None and v.arguments(released.conf) == {v.POLICY: "spread"}
    assert v.edit(released.conf, {}) == released.conf


def test_geometries_follow_version_and_digest_changes_with_them() -> None:
    new = vp.plan(demand(policy(soft=True)), CONF, {"310P3": ENTRY}, {})
    old = vp.plan(demand(policy(version="v1.15.0")), CONF, {"310P3": ENTRY}, {})
    assert new.geometries == {
        "vnpus": {
            "hamiVnpuCore": True,
            "configs": [{"chipName": "310P3", "commonWord": "Ascend310P", "templates": []}],
        }
    }
    assert old.geometries == {
        "vnpus": [{"chipName": "310P3", "commonWord": "Ascend310P", "templates": []}]
    }
    assert new.digest != old.digest
    assert vp.plan(demand(policy(soft=True)), CONF, {"310P3": ENTRY}, {}).digest == new.digest


CHANGE = "2026-12-02T01:00:00Z"


def pod(name: str, created: str, restarted: str = "", **more: Any) -> dict[str, Any]:
    notes = {r.RESTARTED_AT: restarted} if restarted else {}
    built = PodWrapper(name).label("app", "volcano-scheduler").meta(creationTimestamp=created)
    return built.annotations(notes).meta(**more).obj()


DEPLOYMENT = {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "volcano-scheduler"}}}}


@pytest.mark.parametrize(
    ("pods", "stale"),
    [
        ([pod("old", "2026-12-02T00:59:00Z")], ["old"]),
        ([pod("same-second", CHANGE)], ["same-second"]),  # never a false "read it"
        ([pod("new", "2026-12-02T01:00:01Z")], None),
        ([pod("restarted", "2026-12-02T00:59:00Z", restarted=CHANGE)], None),
        (
            [
                pod("old", "2026-12-02T00:59:00Z", deletionTimestamp=CHANGE),
                pod("new", "2026-12-02T01:00:05Z"),
            ],
            None,
        ),
        ([], ["(no pod yet)"]),
        (
            [
                PodWrapper("other")
                .label("app", "x")
                .meta(creationTimestamp="2026-12-02T00:00:00Z")
                .obj()
            ],
            ["(no pod yet)"],
        ),
    ],
)
def test_stale_pods(pods: list[dict[str, Any]], stale: list[str] | None) -> None:
    assert r.stale_pods(DEPLOYMENT, pods, CHANGE) == stale


@pytest.mark.parametrize(
    ("stamp", "due"),
    [
        (None, True),
        ("2026-12-02T00:00:00Z", True),
        (CHANGE, False),
        ("2026-12-02T02:00:00Z", False),
    ],
)
def test_restart_once_per_change(stamp: str | None, due: bool) -> None:
    notes = {r.RESTARTED_AT: stamp} if stamp else {}
    deployment = {"spec": {"template": {"metadata": {"annotations": notes}}}}
    assert r.due(deployment, CHANGE) is due
    assert r.due({"spec": r.patch(CHANGE)["spec"]}, CHANGE) is False


def test_nvidia_and_ascend_policies_share_one_map_and_enable_both() -> None:
    gpu = PolicyDemand(
        "gpu",
        SchedulerSpec.model_validate({"name": "Volcano", "volcano": {"weight": 10}}),
        (),
        False,
        HamiCore.model_validate({"deviceSplitCount": 4}),
        {"volcano": Detected(Version(1, 16, 0), "declared")},
    )
    found = vp.plan(demand(policy(), gpu), CONF, {"310P3": ENTRY}, {})
    assert found.conf is not None and found.geometries is not None
    args = v.arguments(found.conf)
    assert args[v.ENABLE_VNPU] is True and args[v.ENABLE_VGPU] is True
    assert list(found.geometries) == ["nvidia", "vnpus"]
    assert found.geometries["nvidia"]["deviceSplitCount"] == 4


def test_the_change_is_timed_by_the_servers_write_not_the_operators_clock() -> None:
    written = {
        "metadata": {
            "managedFields": [
                {"manager": "kubectl-edit", "time": "2026-12-02T05:00:00Z"},
                {"manager": "tessera", "time": "2026-12-02T01:00:00Z"},
                {"manager": "tessera", "time": "2026-12-02T01:00:07Z", "subresource": ""},
            ]
        }
    }
    assert r.written_at(written, "tessera") == "2026-12-02T01:00:07Z"
    assert r.written_at({"metadata": {}}, "tessera") == ""


def deployment(generation: int = 2, observed: int = 2, **status: int) -> dict[str, Any]:
    counts = {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1, **status}
    return {
        **DEPLOYMENT,
        "metadata": {"generation": generation},
        "status": {"observedGeneration": observed, **counts},
    }


@pytest.mark.parametrize(
    ("given", "why"),
    [
        (deployment(), ""),  # complete
        (deployment(observed=1), "has not seen the latest spec"),
        (deployment(availableReplicas=0), "rollout not complete"),  # new pod not ready
        (deployment(updatedReplicas=0), "rollout not complete"),
        (deployment(replicas=2), "rollout not complete"),  # an old pod still there
    ],
)
def test_rollout_complete_only_when_every_replica_is_updated_and_available(
    given: dict[str, Any], why: str
) -> None:
    found = r.rollout_incomplete(given)
    assert (why in found) if why else found == ""


def test_a_newer_pod_that_is_not_available_is_still_pending() -> None:
    new = [pod("new", "2026-12-02T01:00:05Z")]
    assert r.pending(deployment(), new, CHANGE) == ""
    assert "rollout not complete" in r.pending(deployment(availableReplicas=0), new, CHANGE)
    old = [pod("old", "2026-12-02T00:59:00Z")]
    assert "pods old started before it" in r.pending(deployment(), old, CHANGE)


LEGACY = CONF.replace(
    "  - name: predicates  # keep\n",
    "  - name: predicates  # keep\n  - name: deviceshare\n    arguments:\n"
    "      deviceshare.GPUSharingEnable: true\n",
)


def gpu(name: str = "gpu") -> PolicyDemand:
    spec = SchedulerSpec.model_validate({"name": "Volcano", "volcano": {"weight": 10}})
    core = HamiCore.model_validate({"deviceSplitCount": 4})
    found = {"volcano": Detected(Version(1, 16, 0), "image")}
    return PolicyDemand(name, spec, (), False, core, found)


@pytest.mark.parametrize(
    ("given", "conf", "says"),
    [
        # VGPUEnable with the legacy GPU sharing mode: Volcano exits at start
        (demand(gpu()), LEGACY, "GPUSharingEnable: true"),
        (demand(gpu()), LEGACY.replace("GPUSharing", "GPUNumber"), "GPUNumberEnable: true"),
        # Volcano too old to read the arguments Tessera writes
        (demand(policy(version="v1.13.0")), CONF, "AscendHAMiVNPUEnable"),
        (demand(policy(version="v1.11.0")), CONF, "KnownGeometriesCM*"),
    ],
)
def test_fatal_or_ignored_arguments_are_a_trap_and_nothing_is_written(
    given: VolcanoDemand, conf: str, says: str
) -> None:
    found = vp.plan(given, conf, {"310P3": ENTRY}, {})
    (verdict,) = found.verdicts.values()
    assert (verdict.state, verdict.reason) == ("stalled", "SchedulerTrap")
    assert says in verdict.message
    assert found.conf is None and found.geometries is None  # no write: no change, no restart


def test_legacy_gpu_mode_without_vgpu_and_volcano_1_14_are_fine() -> None:
    assert vp.plan(demand(policy()), LEGACY, {"310P3": ENTRY}, {}).conf is not None
    plan = vp.plan(demand(policy(version="v1.14.0")), CONF, {"310P3": ENTRY}, {})
    assert plan.verdicts["npu"].state == "ready"


@pytest.mark.parametrize(
    ("kept", "weight", "warned"),
    [
        (None, None, True),  # no weight anywhere: device scoring skipped
        ("10", None, False),  # the conf's own weight, kept by Tessera: no warning
        ("0", None, True),
        ("10", 0, True),  # the policy's 0 replaces the conf's 10
    ],
)
def test_the_weight_trap_reads_the_weight_volcano_will_have(
    kept: str | None, weight: int | None, warned: bool
) -> None:
    arguments = f"  - name: deviceshare\n    arguments:\n      deviceshare.ScheduleWeight: {kept}\n"
    conf = CONF + arguments if kept is not None else CONF
    spec = SchedulerSpec.model_validate({"name": "Volcano", "volcano": {"weight": weight}})
    found = {"volcano": Detected(Version(1, 16, 0), "image")}
    one = PolicyDemand("npu", spec, ("310P3",), False, None, found, ascend=True)
    plan = vp.plan(demand(one), conf, {"310P3": ENTRY}, {})
    assert any("ScheduleWeight" in w for w in plan.warnings["npu"]) is warned


UPSTREAM = Path(__file__).parents[2] / "data" / "volcano"


@pytest.mark.parametrize(
    "example", ["vgpu.conf", "hami-vnpu.conf", "mindcluster.conf", "no-deviceshare.conf"]
)
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_written_then_given_back_is_the_conf_byte_for_byte(example: str, newline: str) -> None:
    """The release round trip: Tessera's plugin entry goes again (no null ``arguments:``),
    quoted values stay quoted, a CRLF file keeps CRLF lines."""
    before = (UPSTREAM / example).read_text().replace("\n", newline)
    before = before.replace("SchedulePolicy: binpack", 'SchedulePolicy: "binpack"')
    written = vp.plan(demand(policy(policy="spread")), before, {"310P3": ENTRY}, {})
    assert written.conf is not None and written.conf != before
    assert all(line.endswith("\r") for line in written.conf.split("\n")[:-1]) is (newline != "\n")
    previous = json.loads(json.dumps(dict(written.previous)))
    released = vp.plan(VolcanoDemand(KEY, ()), written.conf, {}, previous)
    assert released.conf == before


def test_an_argument_no_policy_sets_any_more_goes_back_and_a_persons_stays() -> None:
    with_vgpu = CONF + "  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnable: true\n"
    kept = vp.plan(demand(policy()), with_vgpu, {"310P3": ENTRY}, {})
    assert kept.conf is not None and v.arguments(kept.conf)[v.ENABLE_VGPU] is True
    # Tessera had turned VGPUEnable on (it was absent); the NVIDIA policy went
    previous = {v.ENABLE_VGPU: None}
    back = vp.plan(demand(policy()), with_vgpu, {"310P3": ENTRY}, previous)
    assert back.conf is not None and v.ENABLE_VGPU not in v.arguments(back.conf)
    assert v.ENABLE_VGPU not in back.previous


def test_two_confs_in_one_namespace_would_share_the_map_so_both_conflict() -> None:
    other = ObjectKey("volcano-system", "volcano-scheduler-configmap-2")
    demands = {
        KEY: demand(policy("a")),
        other: VolcanoDemand(other, (policy("b"),), {DEPLOY: {"spec": {}}}),
        ObjectKey("elsewhere", "volcano-scheduler-configmap"): VolcanoDemand(
            ObjectKey("elsewhere", "volcano-scheduler-configmap"), (policy("c"),), {}
        ),
        ObjectKey("volcano-system", "released"): VolcanoDemand(
            ObjectKey("volcano-system", "released"), ()
        ),
    }
    found = vp.one_map_per_namespace(demands)
    assert {n: (x.state, x.reason) for n, x in found.items()} == {
        "a": ("stalled", "Conflict"),
        "b": ("stalled", "Conflict"),
    }
    assert "volcano-system/tessera-volcano-device-config" in found["a"].message
