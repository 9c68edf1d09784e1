"""Two SharingPolicies whose pod contracts contradict each other: Conflict on both, neither
enforced.

The platform team slices 310P3 chips in two pools: one scheduled by HAMi, then a second by
Volcano under ``Deny``. A pod's ``huawei.com/Ascend310P`` request says nothing of the pool,
and ValidatingAdmissionPolicies are cluster-wide, so both contracts would check every such
pod and each asks for another ``schedulerName``: under Deny no 310P pod could be admitted.
Tessera stalls both policies (reason Conflict, naming the other and the shared resources),
removes the contract the first had written and never writes the second's; once the second
agrees, both are written. An observer checks that the Deny contract never existed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from devcluster import fleet
from tessera.adapters.kube import Kube, Obj
from tessera.api import constants as c
from tessera.domain import admission

from .conftest import OperatorProcess
from .helpers import condition, eventually
from .sharing_support import SP, delete_policy, policy

FIRST, SECOND = "pco-hami", "pco-volcano"
POOLS = {FIRST: "pco-a", SECOND: "pco-b"}


@pytest.fixture(scope="module")
def pools(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    """One 310P3 node in each pool; the two policies deleted afterwards."""
    specs = [fleet.NodeSpec(f"{pool}-0", "Ascend310P3", 2, pool=pool) for pool in POOLS.values()]
    fleet.create_nodes(kube, specs)
    yield
    for name in POOLS:
        if policy(kube, name) is not None:
            delete_policy(kube, name)


def _policy(name: str, scheduler: str, contract: str) -> Obj:
    sched: dict[str, Any] = {"name": scheduler, "podContract": contract}
    sched["hami"] = {"version": "v2.10.0"}  # no scheduler Deployment here: versions declared
    if scheduler == "Volcano":
        sched["volcano"] = {"version": "v1.16.0"}
    return {
        "apiVersion": c.API_VERSION,
        "kind": "SharingPolicy",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: POOLS[name]}},
            "backend": "Exclusive",
            "ascend": {"softSlicing": True},
            "scheduler": sched,
        },
    }


def _objects(kube: Kube, name: str) -> tuple[Obj | None, Obj | None]:
    target = admission.name_of(name)
    return (
        kube.get_or_none(f"{admission.POLICIES}/{target}"),
        kube.get_or_none(f"{admission.BINDINGS}/{target}"),
    )


def _stalled(kube: Kube, name: str) -> str | None:
    """The Stalled message once the policy's current generation is Stalled for Conflict."""
    obj = policy(kube, name)
    cond = condition(obj, "Stalled")
    if obj is None or cond is None or cond["status"] != "True" or cond["reason"] != "Conflict":
        return None
    seen = cond.get("observedGeneration") == obj["metadata"]["generation"]
    return str(cond["message"]) if seen else None


class Observer:
    """Polls the Deny policy's contract objects: were they ever there?"""

    def __init__(self, kube: Kube, name: str) -> None:
        self.kube, self.name, self.seen = kube, name, False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Observer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            if any(o is not None for o in _objects(self.kube, self.name)):
                self.seen = True


def test_contradicting_contracts_stall_both_and_neither_is_enforced(
    kube: Kube, pools: None
) -> None:
    kube.create(SP, _policy(FIRST, "HAMi", "Warn"))
    eventually(lambda: all(_objects(kube, FIRST)), 60, f"{FIRST}'s contract written")

    with Observer(kube, SECOND) as observer:
        kube.create(SP, _policy(SECOND, "Volcano", "Deny"))
        first = eventually(lambda: _stalled(kube, FIRST), 60, f"{FIRST} Stalled: Conflict")
        second = eventually(lambda: _stalled(kube, SECOND), 60, f"{SECOND} Stalled: Conflict")
        eventually(lambda: _objects(kube, FIRST) == (None, None), 60, f"{FIRST}'s removed")
    assert not observer.seen, f"{SECOND}'s Deny contract was written"
    assert f"SharingPolicy {SECOND} guards huawei.com/Ascend310P" in first, first
    assert "schedulerName hami-scheduler here, volcano there" in first, first
    assert f"SharingPolicy {FIRST} guards huawei.com/Ascend310P" in second, second
    assert "schedulerName volcano here, hami-scheduler there" in second, second
    for name in POOLS:
        status = (policy(kube, name) or {}).get("status") or {}
        assert not (status.get("scheduler") or {}).get("admissionPolicy"), status

    # the second policy agrees (HAMi too): both contracts are written, the conflict is over
    patch = {"spec": {"scheduler": {"name": "HAMi", "volcano": None}}}
    kube.patch(f"{SP}/{SECOND}", patch, kind="merge")
    for name in POOLS:
        eventually(lambda n=name: all(_objects(kube, n)), 60, f"{name}'s contract written")
        eventually(lambda n=name: _stalled(kube, n) is None, 60, f"{name} no longer in Conflict")
