"""Each SharingPolicy's Events tell its own story (issue 13, item 12).

One pass plans every policy and writes for all of them, so whichever policy's
daemon ran first used to collect every write in its Events: ``kubectl describe
sp a`` showed the writes made for ``b``. Here the operator is stopped while two
policies and their nodes are created, so its first pass certainly writes for
both; each policy's Events (selected the way ``kubectl describe`` selects them,
by involvedObject name and uid) must name only its own nodes and key.
"""

from __future__ import annotations

from typing import Any

from devcluster import gpunode
from tessera.adapters.kube import Kube, path_of

from .conftest import OperatorProcess
from .helpers import eventually, namespace
from .sharing_support import create_policy, nodes, policy, wait_ready

POLICIES = {"spev-slices": 2, "spev-notebooks": 4}  # name (and pool) -> time-slicing replicas


def _events(kube: Kube, obj: dict[str, Any]) -> list[dict[str, Any]]:
    meta = obj["metadata"]
    selector = f"involvedObject.name={meta['name']},involvedObject.uid={meta['uid']}"
    found = kube.list(path_of("v1", "events", namespace="default"), field_selector=selector)
    return [e for e in found if e["involvedObject"]["kind"] == "SharingPolicy"]


def test_each_policy_gets_the_events_of_its_own_writes_only(
    kube: Kube, operator: OperatorProcess
) -> None:
    namespace(kube, "gpu-operator")
    agents = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.2).start()
    owned: dict[str, list[str]] = {}
    operator.kill()  # the next pass is the operator's first: it writes for both policies
    try:
        for name, replicas in POLICIES.items():
            owned[name] = nodes(kube, name, 2)
            create_policy(kube, name, name, "TimeSlicing", timeSlicing={"replicas": replicas})
    finally:
        operator.start()
    try:
        keys = {name: wait_ready(kube, name, 90)["status"]["configKey"] for name in POLICIES}
    finally:
        agents.stop()
    for name in POLICIES:
        obj = policy(kube, name)
        assert obj is not None
        mine = [keys[name], *owned[name]]
        theirs = [word for other in POLICIES if other != name for word in (other, keys[other])]

        def written(obj: dict[str, Any] = obj, mine: list[str] = mine) -> list[str]:
            texts = [e["message"] for e in _events(kube, obj) if e["reason"] == "ConfigWritten"]
            return texts if all(w in " ".join(texts) for w in mine) else []

        texts = eventually(written, 30, f"{name}'s ConfigWritten Events naming its key and nodes")
        every = [e["message"] for e in _events(kube, obj)]
        wrong = [m for m in every if any(word in m for word in theirs)]
        assert not wrong, f"{name}'s Events describe another policy's writes: {wrong}"
        print(f"{name}: {texts}")
