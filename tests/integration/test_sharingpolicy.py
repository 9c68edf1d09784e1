"""SharingPolicy on the real API server, against the simulated device plugin and GFD.

Every test owns its nodes (pool ``sp-*``) and policies; ``tessera run`` is the
real operator process with a 5 s resync. What the node agents do is read back
from the API server (labels, allocatable, GFD labels), never from Tessera.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from devcluster import gpunode, hami_nvidia
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import (
    app_pods,
    condition,
    eventually,
    namespace,
    nodes_of,
    serve,
    spare_node,
    wait_running,
)
from .sharing_support import (
    GPU,
    PLUGIN_CM,
    SP,
    NodeRecorder,
    allocatable,
    create_policy,
    delete_policy,
    event_with,
    hami_entries,
    label,
    no_plugin_errors,
    node,
    nodes,
    plugin_data,
    policy,
    set_hami_entries,
    settled,
    wait_ready,
)

HAMI_MODE = "tessera.io/hami-mode"


@pytest.fixture(scope="module", autouse=True)
def agents(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    namespace(kube, "gpu-operator")
    namespace(kube, "sp-work")
    sim = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.2).start()
    hami = hami_nvidia.HamiNvidiaPlugin(kube).start()  # on the gpu=on nodes (nodes(hami=True))
    yield
    hami.stop()
    sim.stop()


def _applied(kube: Kube, names: list[str], key: str, per_node: int) -> bool:
    return all(label(kube, n) == key and allocatable(kube, n) == per_node for n in names)


def _gfd(kube: Kube, name: str) -> tuple[str | None, str | None]:
    return label(kube, name, c.GPU_REPLICAS_LABEL), label(kube, name, c.GPU_SHARING_STRATEGY_LABEL)


# -- one test per backend --------------------------------------------------------------------------


def test_exclusive_writes_its_key_before_labelling_and_reports_status(kube: Kube) -> None:
    names = nodes(kube, "sp-excl", 2)
    create_policy(kube, "sp-excl", "sp-excl", "Exclusive")
    obj = wait_ready(kube, "sp-excl")
    key = obj["status"]["configKey"]
    assert key.startswith("sp-excl-")
    assert "version: v1" in plugin_data(kube)[key]
    assert "sharing" not in plugin_data(kube)[key]
    assert "default" in plugin_data(kube)  # the key unmatched nodes run
    eventually(lambda: _applied(kube, names, key, 8), what="whole GPUs advertised")
    assert obj["status"]["nodes"] == {"matched": 2, "applied": 2, "conflicted": 0}
    assert obj["status"]["advertised"] == {GPU: "16"}
    assert all(_gfd(kube, n) == ("1", "none") for n in names)
    no_plugin_errors(kube, names)


def test_time_slicing_multiplies_what_each_node_advertises(kube: Kube) -> None:
    names = nodes(kube, "sp-ts", 2)
    create_policy(kube, "sp-ts", "sp-ts", "TimeSlicing", timeSlicing={"replicas": 4})
    obj = wait_ready(kube, "sp-ts")
    key = obj["status"]["configKey"]
    assert "timeSlicing" in plugin_data(kube)[key]
    eventually(lambda: _applied(kube, names, key, 32), what="8 GPUs x 4 replicas per node")
    eventually(lambda: all(_gfd(kube, n) == ("4", "time-slicing") for n in names), what="GFD")
    assert obj["status"]["advertised"] == {GPU: "64"}
    ready = condition(obj, "Ready")
    assert ready is not None and ready["observedGeneration"] == obj["metadata"]["generation"]
    assert all(
        node(kube, n)["metadata"]["annotations"][c.DEVICE_PLUGIN_CONFIG_APPLIED_ANNOTATION] == key
        for n in names
    )
    no_plugin_errors(kube, names)


def test_mps_first_config_rolls_out_and_leaves_the_node_schedulable(kube: Kube) -> None:
    names = nodes(kube, "sp-mps", 1, "none")
    with NodeRecorder(kube, names) as seen:
        create_policy(kube, "sp-mps", "sp-mps", "MPS", mps={"replicas": 4})
        obj = wait_ready(kube, "sp-mps")
        key = obj["status"]["configKey"]
        eventually(lambda: _applied(kube, names, key, 32), what="8 GPUs x 4 MPS clients")
        eventually(lambda: _gfd(kube, names[0]) == ("4", "mps"), what="GFD says mps")
        eventually(lambda: settled(kube, names[0]), what="node released after the rollout")
    assert seen.cordoned == set(names)  # exclusive -> MPS changes the compute mode: drained first
    assert "mps:" in plugin_data(kube)[key]
    no_plugin_errors(kube, names)


def test_hami_core_writes_its_fields_and_keeps_every_human_field(kube: Kube) -> None:
    names = nodes(kube, "sp-hami", 2, hami=True)
    human = {"name": "someone-elses-node", "operatingmode": "mig", "migstrategy": "none"}
    filters = {"uuid": ["GPU-1"], "index": []}
    try:
        kube.create(
            path_of("v1", "configmaps", namespace="kube-system"),
            {"metadata": {"name": c.HAMI_NVIDIA_CONFIGMAP_NAME}, "data": {"config.json": "{}"}},
        )
    except ApiError as err:
        assert err.conflict
    before = [e for e in hami_entries(kube).values() if e["name"] not in names]
    set_hami_entries(kube, [*before, human, {"name": names[0], "filterdevices": filters}])
    spec = {"deviceSplitCount": 5, "deviceMemoryScaling": 1.5}
    create_policy(kube, "sp-hami", "sp-hami", "HAMiCore", hamiCore=spec)
    obj = wait_ready(kube, "sp-hami", 90)
    entries = hami_entries(kube)
    for n in names:
        assert entries[n]["operatingmode"] == "hami-core"
        assert entries[n]["devicesplitcount"] == 5
        assert entries[n]["devicememoryscaling"] == 1.5
        assert label(kube, n, HAMI_MODE) == "hami-core"
        assert settled(kube, n)
    assert entries[names[0]]["filterdevices"] == filters  # a person's field in Tessera's entry
    assert entries["someone-elses-node"] == human
    assert obj["status"]["advertised"] == {GPU: "80"}  # 2 nodes x 8 GPUs x 5 slots
    managed = kube.get(path_of("v1", "configmaps", c.HAMI_NVIDIA_CONFIGMAP_NAME, "kube-system"))
    assert set(
        re.findall(r"(sp-hami-\d)=", managed["metadata"]["annotations"][c.MANAGED_NODES_ANNOTATION])
    ) == set(names)


def test_hami_mps_mode_says_what_upstream_hami_really_runs(kube: Kube) -> None:
    names = nodes(kube, "sp-hmps", 1, hami=True)
    create_policy(kube, "sp-hmps", "sp-hmps", "HAMiCore", hamiCore={"mode": "MPS"})
    obj = wait_ready(kube, "sp-hmps", 90)
    fallback = condition(obj, "BackendFallback")
    assert fallback is not None and fallback["status"] == "True"
    assert "no MPS code path" in fallback["message"]
    assert hami_entries(kube)[names[0]]["operatingmode"] == "hami-core"


# -- overlap -----------------------------------------------------------------------------------------


def _stalled(kube: Kube, name: str, reason: str) -> dict[str, object] | None:
    cond = condition(policy(kube, name), "Stalled")
    return cond if cond and cond["status"] == "True" and cond["reason"] == reason else None


def test_equal_priorities_conflict_on_both_and_the_nodes_keep_their_config(kube: Kube) -> None:
    names = nodes(kube, "sp-ov", 2)
    create_policy(kube, "sp-ov-a", "sp-ov", "TimeSlicing", timeSlicing={"replicas": 2})
    key_a = wait_ready(kube, "sp-ov-a")["status"]["configKey"]
    eventually(lambda: _applied(kube, names, key_a, 16), what="policy a applied")
    create_policy(kube, "sp-ov-b", "sp-ov", "TimeSlicing", timeSlicing={"replicas": 3})
    for name in ("sp-ov-a", "sp-ov-b"):
        cond = eventually(lambda n=name: _stalled(kube, n, "Conflict"), what=f"{name} Conflict")
        assert "sharingpolicy/sp-ov-a and sharingpolicy/sp-ov-b" in str(cond["message"])
        assert all(n in str(cond["message"]) for n in names)
        assert policy(kube, name)["status"]["nodes"]["conflicted"] == 2  # type: ignore[index]
    eventually(  # the Event may be written after the status that reports the conflict
        lambda: event_with(kube, "sp-ov-b", "Conflict", *names), 30, "sp-ov-b's Conflict Event"
    )
    assert _applied(kube, names, key_a, 16)  # held: no flip-flop between the tied policies
    kube.patch(f"{SP}/sp-ov-b", {"spec": {"priority": 1}})
    key_b = wait_ready(kube, "sp-ov-b")["status"]["configKey"]
    eventually(lambda: _applied(kube, names, key_b, 24), what="the higher priority wins")
    loser = wait_ready(kube, "sp-ov-a")
    assert loser["status"]["nodes"] == {"matched": 0, "applied": 0, "conflicted": 0}
    assert key_a in plugin_data(kube)  # kept while its policy exists: it may win nodes again
    no_plugin_errors(kube, names)


# -- drift -------------------------------------------------------------------------------------------


def _passes(operator: OperatorProcess, name: str, since: int, outcome: str = "") -> int:
    """Passes of the policy logged since ``since``: run in full (``done``), skipped as idle
    (``skipped``: nothing it reads changed), or both."""
    text = operator.log()[since:]
    done = re.findall(rf"sharingpolicy/{name}: pass (done|skipped)", text)
    return len([d for d in done if d == outcome or not outcome])


def _versions(kube: Kube, names: list[str]) -> dict[str, str]:
    objs = {"cm": kube.get(PLUGIN_CM), "sp": policy(kube, "sp-drift") or {}}
    objs |= {n: node(kube, n) for n in names}
    return {k: o["metadata"]["resourceVersion"] for k, o in objs.items()}


def test_drift_is_restored_with_an_event_and_a_converged_cluster_gets_no_writes(
    kube: Kube, operator: OperatorProcess
) -> None:
    names = nodes(kube, "sp-drift", 2)
    create_policy(kube, "sp-drift", "sp-drift", "TimeSlicing", timeSlicing={"replicas": 4})
    key = wait_ready(kube, "sp-drift")["status"]["configKey"]
    eventually(lambda: _applied(kube, names, key, 32), what="applied")
    content = plugin_data(kube)[key]

    # converged: two resync intervals (5 s each) of passes leave every object as it was
    mark = len(operator.log())
    before = _versions(kube, names)
    eventually(lambda: _passes(operator, "sp-drift", mark) >= 3, 30, "three passes (>= 2 resyncs)")
    assert _versions(kube, names) == before
    # ...and cheap: a resync that finds nothing it reads changed skips the pass; the drift
    # below is a change of what it reads, so it still runs in full and repairs it
    eventually(lambda: _passes(operator, "sp-drift", mark, "skipped") >= 1, 30, "a skipped pass")

    kube.patch(PLUGIN_CM, {"data": {key: "version: v1\nsharing: {}\n"}})
    eventually(lambda: plugin_data(kube)[key] == content, 10, "generated key restored")
    assert eventually(lambda: event_with(kube, "sp-drift", "DriftRestored", f"restored key {key}"))

    kube.patch(
        path_of("v1", "nodes", names[1]),
        {"metadata": {"labels": {c.DEVICE_PLUGIN_CONFIG_LABEL: "default"}}},
    )
    eventually(lambda: label(kube, names[1]) == key, 10, "node label restored")
    assert eventually(
        lambda: event_with(kube, "sp-drift", "DriftRestored", "restored label", names[1])
    )
    eventually(lambda: allocatable(kube, names[1]) == 32, what="the plugin re-advertises")
    no_plugin_errors(kube, names)


def test_hami_entry_drift_is_restored_and_the_human_fields_stay(kube: Kube) -> None:
    names = nodes(kube, "sp-hdrift", 1, hami=True)
    create_policy(kube, "sp-hdrift", "sp-hdrift", "HAMiCore", hamiCore={"deviceSplitCount": 4})
    wait_ready(kube, "sp-hdrift", 90)
    entries = hami_entries(kube)
    edited = {**entries[names[0]], "devicesplitcount": 99, "libcudaloglevel": "3"}
    set_hami_entries(kube, [edited if e["name"] == names[0] else e for e in entries.values()])
    eventually(lambda: hami_entries(kube)[names[0]]["devicesplitcount"] == 4, 10, "entry restored")
    assert hami_entries(kube)[names[0]]["libcudaloglevel"] == "3"  # not Tessera's field
    message = eventually(lambda: event_with(kube, "sp-hdrift", "DriftRestored", names[0]))
    assert "devicesplitcount=4" in message and "edited by hand" in message


# -- deletion ----------------------------------------------------------------------------------------


def test_deletion_returns_nodes_to_the_default_and_removes_only_tesseras_entries(
    kube: Kube,
) -> None:
    ts_nodes = nodes(kube, "sp-del", 2)
    hami_nodes = nodes(kube, "sp-delh", 1, hami=True)
    create_policy(kube, "sp-del", "sp-del", "TimeSlicing", timeSlicing={"replicas": 3})
    create_policy(kube, "sp-delh", "sp-delh", "HAMiCore", hamiCore={"deviceSplitCount": 2})
    key = wait_ready(kube, "sp-del")["status"]["configKey"]
    wait_ready(kube, "sp-delh", 90)
    eventually(lambda: _applied(kube, ts_nodes, key, 24), what="time-slicing applied")
    entries = hami_entries(kube)
    mine = {**entries[hami_nodes[0]], "filterdevices": {"uuid": [], "index": [3]}}
    bystander = {"name": "sp-del-human", "operatingmode": "hami-core", "devicesplitcount": 7}
    others = [e for e in entries.values() if e["name"] not in (hami_nodes[0], "sp-del-human")]
    set_hami_entries(kube, [*others, mine, bystander])
    human_key = "sp-del-by-hand"
    kube.patch(PLUGIN_CM, {"data": {human_key: "version: v1\n"}})

    delete_policy(kube, "sp-del")
    delete_policy(kube, "sp-delh")
    for n in ts_nodes:
        assert label(kube, n) == "default"
        assert c.DEVICE_PLUGIN_CONFIG_APPLIED_ANNOTATION not in (
            node(kube, n)["metadata"].get("annotations") or {}
        )
    eventually(lambda: all(allocatable(kube, n) == 8 for n in ts_nodes), what="whole GPUs again")
    data = plugin_data(kube)
    assert key not in data and "default" in data and data[human_key] == "version: v1\n"
    entries = hami_entries(kube)
    assert entries[hami_nodes[0]] == {
        "name": hami_nodes[0],
        "filterdevices": {"uuid": [], "index": [3]},
    }
    assert entries["sp-del-human"] == bystander
    assert label(kube, hami_nodes[0], HAMI_MODE) is None
    assert all(settled(kube, n) for n in ts_nodes + hami_nodes)
    no_plugin_errors(kube, ts_nodes + hami_nodes)


# -- in place vs rollout -----------------------------------------------------------------------------


def test_raising_replicas_on_ten_nodes_applies_in_place_without_a_cordon(kube: Kube) -> None:
    names = nodes(kube, "sp-ten", 10)
    create_policy(kube, "sp-ten", "sp-ten", "TimeSlicing", timeSlicing={"replicas": 2})
    old = wait_ready(kube, "sp-ten")["status"]["configKey"]
    eventually(lambda: _applied(kube, names, old, 16), what="2 replicas on 10 nodes")
    with NodeRecorder(kube, names) as seen:
        kube.patch(f"{SP}/sp-ten", {"spec": {"timeSlicing": {"replicas": 4}}})
        obj = wait_ready(kube, "sp-ten")
        new = obj["status"]["configKey"]
        assert new != old
        eventually(lambda: _applied(kube, names, new, 32), what="4 replicas on 10 nodes")
    assert seen.cordoned == set()
    assert {value for _, value in seen.labels} <= {old, new}  # never anything in between
    assert obj["status"]["advertised"] == {GPU: "320"}
    eventually(lambda: old not in plugin_data(kube), what="the old key deleted once unused")
    no_plugin_errors(kube, names)


def _reconciling(kube: Kube, name: str, reason: str) -> bool:
    cond = condition(policy(kube, name), "Reconciling")
    return bool(cond and cond["status"] == "True" and cond["reason"] == reason)


def _uids(kube: Kube, app: str) -> set[str]:
    """The uids of ``app``'s pods in sp-work, terminating ones included."""
    return {p["metadata"]["uid"] for p in app_pods(kube, "sp-work", app, live=False)}


def _pdb(kube: Kube, name: str) -> dict[str, object]:
    return kube.get(f"/apis/policy/v1/namespaces/sp-work/poddisruptionbudgets/{name}")


def test_backend_switch_drains_the_running_pod_through_the_eviction_api(kube: Kube) -> None:
    names = nodes(kube, "sp-sw", 1, "none")
    create_policy(kube, "sp-sw", "sp-sw", "MPS", mps={"replicas": 2})
    mps_key = wait_ready(kube, "sp-sw")["status"]["configKey"]
    eventually(lambda: settled(kube, names[0]) and allocatable(kube, names[0]) == 16, what="MPS on")
    # a training Deployment the scheduler places on the pool's node, under a PDB that allows
    # no disruption (minAvailable 1 of 1 replica); then a spare node where it could run
    # instead, so that the PDB alone holds the drain (not Tessera's capacity check)
    trains = {"sp.tessera.io/trains": "sp-sw"}
    kube.patch(path_of("v1", "nodes", names[0]), {"metadata": {"labels": trains}})
    (train,) = serve(kube, "sp-work", "sp-train", node_selector=trains, resource=GPU, budget=1)
    assert nodes_of([train]) == names
    spare = spare_node(kube, "sp-sw-spare", trains, {GPU: 8})
    victim, uid = train["metadata"]["name"], train["metadata"]["uid"]
    eventually(
        lambda: (_pdb(kube, "sp-train").get("status") or {}).get("currentHealthy") == 1,  # type: ignore[union-attr]
        what="the disruption controller counted the pod",
    )
    spec = {"backend": "TimeSlicing", "mps": None, "timeSlicing": {"replicas": 4}}
    kube.patch(f"{SP}/sp-sw", {"spec": spec})

    # the PDB allows no disruption: cordoned and draining, the pod stays, the node keeps MPS
    eventually(lambda: _reconciling(kube, "sp-sw", "Draining"), 30, "Reconciling/Draining")
    held = f"eviction of pod sp-work/{victim} blocked by PodDisruptionBudget sp-work/sp-train"
    eventually(  # named at once, not after drain.timeout (issue 13, item 7)
        lambda: held in (condition(policy(kube, "sp-sw"), "Reconciling") or {}).get("message", ""),
        30,
        "Reconciling naming the pod and its PDB",
    )
    assert eventually(lambda: event_with(kube, "sp-sw", "EvictionBlocked", held))
    assert node(kube, names[0])["spec"].get("unschedulable")
    assert [p["metadata"]["uid"] for p in app_pods(kube, "sp-work", "sp-train")] == [uid]
    assert label(kube, names[0]) == mps_key and allocatable(kube, names[0]) == 16

    budget_path = "/apis/policy/v1/namespaces/sp-work/poddisruptionbudgets/sp-train"
    kube.patch(budget_path, {"spec": {"minAvailable": 0}})
    eventually(
        lambda: uid not in _uids(kube, "sp-train"), 30, "pod evicted (gone, not terminating)"
    )
    ts_key = wait_ready(kube, "sp-sw")["status"]["configKey"]
    eventually(
        lambda: _applied(kube, names, ts_key, 32) and settled(kube, names[0]), what="switched"
    )
    assert event_with(kube, "sp-sw", "Evict", f"sp-work/{victim}")
    # the ReplicaSet's replacement, placed while the pool's node was cordoned, runs on the spare
    (back,) = wait_running(kube, "sp-work", "sp-train", 1)
    assert back["metadata"]["uid"] != uid and nodes_of([back]) == [spare]
    eventually(lambda: mps_key not in plugin_data(kube), what="MPS key deleted")
    no_plugin_errors(kube, names)
