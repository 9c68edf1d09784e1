"""SharingPolicy on the real API server, against the simulated device plugin and GFD.

Every test owns its nodes (pool ``sp-*``) and policies; ``tessera run`` is the
real operator process with a 5 s resync. What the node agents do is read back
from the API server (labels, allocatable, GFD labels), never from Tessera.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c
from tessera.devcluster import gpunode, kubelet

from .conftest import OperatorProcess
from .helpers import condition, eventually, gpu_pod, namespace
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
    sims = [gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.2).start(), kubelet.Kubelet(kube).start()]
    yield
    for sim in sims:
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
    assert all(node(kube, n)["metadata"]["annotations"][c.DEVICE_PLUGIN_CONFIG_APPLIED_ANNOTATION] == key for n in names)
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
    names = nodes(kube, "sp-hami", 2)
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
    assert set(re.findall(r"(sp-hami-\d)=", managed["metadata"]["annotations"][c.MANAGED_NODES_ANNOTATION])) == set(names)


def test_hami_mps_mode_says_what_upstream_hami_really_runs(kube: Kube) -> None:
    names = nodes(kube, "sp-hmps", 1)
    create_policy(kube, "sp-hmps", "sp-hmps", "HAMiCore", hamiCore={"mode": "MPS"})
    obj = wait_ready(kube, "sp-hmps", 90)
    fallback = condition(obj, "BackendFallback")
    assert fallback is not None and fallback["status"] == "True"
    assert "no MPS code path" in fallback["message"]
    assert hami_entries(kube)[names[0]]["operatingmode"] == "hami-core"
