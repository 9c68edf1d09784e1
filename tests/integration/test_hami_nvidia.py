"""HAMi-core capacity, observed: a HAMiCore policy's status counts what HAMi's plugin advertises.

A platform engineer has HAMi installed (``hami-scheduler-device``, its scheduler) and two A10
nodes labelled ``gpu=on``, where HAMi's NVIDIA device plugin runs (simulated over its protocol:
``devcluster.hami_nvidia``). They apply a ``backend: HAMiCore`` policy: Tessera writes the nodes'
``config.json`` entries, the plugin re-registers GPUs x ``deviceSplitCount`` slots, and the
policy's ``status.advertised`` is the sum of what the nodes advertise. They change
``deviceSplitCount``: the nodes re-advertise and the status follows. When the plugin on a node
does not re-register (it reads ``config.json`` when it starts, and its pod has not restarted),
the policy is not Ready and says which node waits, with what it advertises — never a predicted
number. The plugin's restart ends the wait.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from devcluster import fleet, gpunode, hami_nvidia, schedulers
from tessera.adapters.kube import Kube, Obj, path_of

from .conftest import OperatorProcess
from .helpers import condition, eventually, namespace
from .sharing_support import SP, create_policy, delete_policy, hami_entries, policy, wait_ready

pytestmark = pytest.mark.integration
GPU = "nvidia.com/gpu"
POOL = "hami-a10"


@pytest.fixture(scope="module", autouse=True)
def plugins(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    namespace(kube, "gpu-operator")
    schedulers.install_hami(kube)
    agents = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.2).start()
    plugin = hami_nvidia.HamiNvidiaPlugin(kube).start()
    yield
    plugin.stop()
    agents.stop()
    schedulers.uninstall(kube)


def node(kube: Kube, name: str) -> Obj:
    return kube.get(path_of("v1", "nodes", name))


def advertised(kube: Kube, names: list[str]) -> list[int]:
    return [int(node(kube, n)["status"]["allocatable"].get(GPU, "0")) for n in names]


def registered(kube: Kube, name: str) -> list[int]:
    """The slots per GPU in HAMi's register annotation on the node."""
    raw = (node(kube, name)["metadata"].get("annotations") or {}).get(
        hami_nvidia.REGISTER_ANNOTATION, "[]"
    )
    return [gpu["count"] for gpu in json.loads(raw)]


def status_follows(kube: Kube, names: list[str], per_node: int) -> Obj:
    """Ready for its generation, and ``status.advertised`` is what the nodes advertise."""
    eventually(lambda: advertised(kube, names) == [per_node] * len(names), 60, f"{per_node} each")
    obj = wait_ready(kube, POOL, 90)
    assert obj["status"]["advertised"] == {GPU: str(sum(advertised(kube, names)))}
    return obj


def test_status_advertises_what_hamis_plugin_registers_and_follows_a_split_change(
    kube: Kube,
) -> None:
    names = fleet.create_from_manifests(kube, hami_nvidia.pool(POOL, 2, gpus=4))
    # before any policy: the chart's nvidia.deviceSplitCount (10) from hami-scheduler-device
    eventually(lambda: advertised(kube, names) == [40, 40], 30, "HAMi's default split")
    try:
        create_policy(kube, POOL, POOL, "HAMiCore", hamiCore={"deviceSplitCount": 4})
        status_follows(kube, names, 16)
        assert all(hami_entries(kube)[n]["devicesplitcount"] == 4 for n in names)
        assert registered(kube, names[0]) == [4, 4, 4, 4]

        kube.patch(f"{SP}/{POOL}", {"spec": {"hamiCore": {"deviceSplitCount": 6}}})
        status_follows(kube, names, 24)

        # the plugin on one node does not restart: it keeps its registration
        stuck = {hami_nvidia.STUCK_ANNOTATION: "true"}
        kube.patch(path_of("v1", "nodes", names[1]), {"metadata": {"annotations": stuck}})
        kube.patch(f"{SP}/{POOL}", {"spec": {"hamiCore": {"deviceSplitCount": 3}}})
        eventually(lambda: advertised(kube, names) == [12, 24], 60, "one node re-advertised")

        def waiting() -> Obj | None:
            obj = policy(kube, POOL) or {}
            ready = condition(obj, "Ready") or {}
            fresh = (obj.get("status") or {}).get("observedGeneration") == obj["metadata"][
                "generation"
            ]
            seen = (obj.get("status") or {}).get("advertised")
            steady = seen == {GPU: "36"}  # 12 + 24, as advertised: the pass after names[0]'s
            return obj if fresh and steady and ready.get("status") == "False" else None

        obj = eventually(waiting, 60, "the policy not Ready while a node waits for HAMi's plugin")
        message = condition(obj, "Ready")["message"]  # type: ignore[index]
        assert message.startswith("1 node(s) wait for HAMi's device plugin"), message
        assert f"node {names[1]} advertises 24 {GPU}, want 12" in message, message
        kube.patch(
            path_of("v1", "nodes", names[1]),
            {"metadata": {"annotations": {hami_nvidia.STUCK_ANNOTATION: None}}},
        )  # the plugin's pod restarts and reads config.json
        status_follows(kube, names, 12)
    finally:
        delete_policy(kube, POOL)
