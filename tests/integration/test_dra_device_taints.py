"""Issue 28, item 4: a DRA pool's rollout keeps new claims off exactly the devices that change.

One H100 node of four GPUs in a pool with ``allocation: DRA`` (the simulated MIG manager and
NVIDIA DRA driver, kube-scheduler allocating the claims, ``DRADeviceTaints`` on); two
replicas of ``serve`` hold one whole GPU each, under a PDB that lets none go, so the node's
window stays open while the test looks. The change repartitions one GPU a replica holds and
one that is free. An outside watcher lists Tessera's DeviceTaintRules all along:

* during the window there is one rule for each device on the two changed GPUs, no other;
* a workload that tolerates the node's cordon and taint and asks for two whole GPUs of that
  node gets the free unchanged GPU and no more: kube-scheduler does not allocate the free
  tainted one (the second replica is reported unschedulable, its claim stays unallocated);
* once the PDB lets the replica go, the node is verified and released: no Tessera rule is
  left, and no rule ever named a device of a GPU that does not change;
* a revert mid-rollout, and then the pool's deletion mid-rollout, leave no rule either.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import DeploymentWrapper, PdbWrapper
from builders.workloads import HOSTNAME
from devcluster import dradriver, fleet
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .dra_support import NPG, DraObjects, delete_and_wait, dra_objects, driver, whole_gpu_pool
from .faults import agents, assert_released, npg, pool_nodes, wait_ready
from .helpers import eventually, namespace, wait_running

__all__ = ["agents", "dra_objects", "driver"]
pytestmark = pytest.mark.integration
RESOURCE = "resource.k8s.io/v1"
RULES = "/apis/resource.k8s.io/v1alpha3/devicetaintrules"
WHOLE = {"mig": {"layouts": [{"devices": "all", "profiles": {}}]}}
REPLICAS = 2


def split(changed: set[int]) -> dict[str, Any]:
    """GPUs ``changed`` into seven 1g.10gb each, the others whole."""
    rest = sorted(set(range(4)) - changed)
    layouts = [{"devices": ",".join(map(str, sorted(changed))), "profiles": {"1g.10gb": 7}}]
    layouts.append({"devices": ",".join(map(str, rest)), "profiles": {}})
    return {"mig": {"layouts": layouts}}


@dataclass
class RuleWatch:
    """Every Tessera DeviceTaintRule the API server shows, as an outside observer sees them."""

    kube: Kube
    now: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (pool, device)
    ever: set[tuple[str, str]] = field(default_factory=set)
    effects: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _seen(self, kind: str, rule: Obj) -> None:
        labels = rule["metadata"].get("labels") or {}
        if labels.get(c.MANAGED_BY_LABEL) != c.MANAGED_BY_VALUE:
            return
        selector = rule["spec"].get("deviceSelector") or {}
        where = (str(selector.get("pool")), str(selector.get("device")))
        with self._lock:
            if kind == "DELETED":
                self.now.pop(rule["metadata"]["name"], None)
                return
            self.now[rule["metadata"]["name"]] = where
            self.ever.add(where)
            self.effects.add(rule["spec"]["taint"]["effect"])

    def on(self, node: str) -> set[str]:
        with self._lock:
            return {device for pool, device in self.now.values() if pool == node}

    def count(self) -> int:
        with self._lock:
            return len(self.now)


@contextmanager
def watching(kube: Kube) -> Iterator[RuleWatch]:
    watch = RuleWatch(kube)
    informer = Informer(kube, RULES, watch._seen, name="rule-watch")
    informer.start()
    try:
        eventually(informer.synced.is_set, 30, "the DeviceTaintRule watch synced")
        yield watch
    finally:
        informer.stop()


def gpus_of(kube: Kube, ns: str, node: str, want: int) -> dict[str, int] | None:
    """Claim name → the GPU it holds on ``node``, once ``want`` claims are allocated."""
    out = {}
    for claim in kube.list(path_of(RESOURCE, "resourceclaims", namespace=ns)):
        alloc = (claim.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or []:
            if r["pool"] == node:
                out[claim["metadata"]["name"]] = int(r["device"].removeprefix("gpu-"))
    return out if len(out) == want else None


def claimed(manifest: Obj, template: str) -> Obj:
    pod = manifest["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    pod["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return manifest


def one_gpu_template(kube: Kube, ns: str, name: str) -> None:
    requests = [{"name": "gpu", "exactly": {"deviceClassName": "gpu.tessera.io"}}]
    body = {"metadata": {"name": name}, "spec": {"spec": {"devices": {"requests": requests}}}}
    kube.create(path_of(RESOURCE, "resourceclaimtemplates", namespace=ns), body)


@dataclass(frozen=True)
class Held:
    node: str
    ns: str
    gpus: dict[str, int]  # claim -> GPU of the serve replicas


def held_pool(kube: Kube, dra_objects: DraObjects, pool: str) -> Held:
    """A pool of one DRA node at whole GPUs, two ``serve`` replicas on it under a PDB that lets
    none go, and an empty spare node (room for the replica that moves; it changes first)."""
    ns = f"{pool}-ns"
    node = whole_gpu_pool(kube, dra_objects, pool)
    namespace(kube, ns)
    one_gpu_template(kube, ns, "serve")
    manifest = claimed(DeploymentWrapper("serve").replicas(REPLICAS).pool(pool).obj(), "serve")
    kube.create(path_of("apps/v1", "deployments", namespace=ns), manifest)
    kube.create(
        path_of("policy/v1", "poddisruptionbudgets", namespace=ns),
        PdbWrapper("serve").match(app="serve").min_available(REPLICAS).obj(),
    )
    wait_running(kube, ns, "serve", REPLICAS, 90)
    gpus = eventually(lambda: gpus_of(kube, ns, node, REPLICAS), 60, "each replica's GPU")
    fleet.create_nodes(kube, [fleet.NodeSpec(f"{pool}-1", "H100-80GB", 4, pool=pool, dra=True)])
    wait_ready(kube, pool, 180, "the spare node at whole GPUs")
    return Held(node, ns, gpus)


def phase_of(kube: Kube, node: str) -> str | None:
    found = kube.get(path_of("v1", "nodes", node))
    return (found["metadata"].get("annotations") or {}).get(c.NODE_PHASE_ANNOTATION)


def blocked(kube: Kube, node: str) -> bool:
    """The node's drain is held by the PDB: its window is open and stays open."""
    return phase_of(kube, node) == "Blocked"


def change(held: Held) -> tuple[set[int], int]:
    """One GPU a replica holds and one free GPU change; the other free GPU stays."""
    busy, free = sorted(held.gpus.values()), sorted(set(range(4)) - set(held.gpus.values()))
    return {busy[0], free[0]}, free[1]


def node_events(kube: Kube, node: str) -> list[Obj]:
    return kube.list(
        "/api/v1/namespaces/default/events", field_selector=f"involvedObject.name={node}"
    )


def condition(kube: Kube, pool: str, type_: str) -> dict[str, Any] | None:
    conditions = ((npg(kube, pool) or {}).get("status") or {}).get("conditions") or []
    return next((x for x in conditions if x.get("type") == type_), None)


def test_only_the_changed_devices_are_tainted_and_the_scheduler_keeps_new_claims_off_them(
    kube: Kube, operator: OperatorProcess, driver: dradriver.DraDriver, dra_objects: DraObjects
) -> None:
    pool = "dra-taints"
    held = held_pool(kube, dra_objects, pool)
    changed, stays = change(held)
    with watching(kube) as rules:
        assert rules.count() == 0, "no Tessera DeviceTaintRule before the change"
        kube.patch(f"{NPG}/{pool}", {"spec": split(changed)})
        eventually(lambda: blocked(kube, held.node), 150, f"{held.node} held up by the PDB")
        want = {f"gpu-{i}" for i in changed}
        eventually(lambda: rules.on(held.node) == want, 30, f"rules for exactly {sorted(want)}")
        assert rules.effects == {"NoSchedule"}
        tainted = condition(kube, pool, "DeviceTaints")
        assert tainted is not None and tainted["reason"] == "DevicesTainted", tainted
        assert all(f"{held.node}: " in tainted["message"] and d in tainted["message"] for d in want)

        # A workload that tolerates the node's hold and wants two GPUs of this node: only the
        # free GPU that does not change may be allocated (kube-scheduler's decision).
        one_gpu_template(kube, held.ns, "greedy")
        greedy = DeploymentWrapper("greedy").replicas(2).node_selector({HOSTNAME: held.node})
        manifest = claimed(greedy.obj(), "greedy")
        manifest["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
        kube.create(path_of("apps/v1", "deployments", namespace=held.ns), manifest)

        def greedy_pods() -> list[Obj]:
            return kube.list(f"/api/v1/namespaces/{held.ns}/pods", label_selector="app=greedy")

        def unschedulable() -> list[Obj]:
            return [
                p
                for p in greedy_pods()
                for cond in (p.get("status") or {}).get("conditions") or []
                if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable"
            ]

        eventually(lambda: len(unschedulable()) == 1, 60, "one greedy replica unschedulable")
        allocated = eventually(
            lambda: gpus_of(kube, held.ns, held.node, REPLICAS + 1), 30, "the greedy claim"
        )
        new = {claim: gpu for claim, gpu in allocated.items() if claim.startswith("greedy-")}
        assert list(new.values()) == [stays], (new, changed, held.gpus)
        assert rules.on(held.node) == want, "the window's rules are unchanged"

        # The PDB lets the replica go: the node is drained, repartitioned, verified, released.
        pdb = path_of("policy/v1", "poddisruptionbudgets", "serve", held.ns)
        kube.patch(pdb, {"spec": {"minAvailable": REPLICAS - 1}})
        kube.delete(path_of("apps/v1", "deployments", "greedy", held.ns))
        wait_ready(kube, pool, 180, "the changed GPUs repartitioned")
        eventually(lambda: rules.count() == 0, 30, "no Tessera DeviceTaintRule left")
        assert kube.list(RULES, label_selector="app.kubernetes.io/managed-by=tessera") == []
        ruled: dict[str, set[int]] = {}
        for node, device in rules.ever:
            ruled.setdefault(node, set()).add(int(device.split("-")[1]))
        assert ruled[held.node] == changed, "rules on exactly the GPUs that change"
        # The spare changes the same GPUs. Under load its change may find the claims unable
        # to say who holds what (a replica landing there mid-allocation): then it is drained
        # whole, every device tainted, and its Events say why; never a rule on an unchanged
        # GPU without that.
        spare = f"{pool}-1"
        if not ruled.get(spare, set()) <= changed:
            said = [str(e.get("message")) for e in node_events(kube, spare)]
            assert ruled[spare] == set(range(4)), (ruled, said)
            assert any("whole node" in m for m in said), (ruled, said)
    assert_released(kube, pool)
    done = condition(kube, pool, "DeviceTaints")
    assert done is not None and done["reason"] == "NoDeviceChanging", done


def test_a_revert_and_the_pools_deletion_mid_rollout_leave_no_rule(
    kube: Kube, operator: OperatorProcess, driver: dradriver.DraDriver, dra_objects: DraObjects
) -> None:
    pool = "dra-taints-back"
    held = held_pool(kube, dra_objects, pool)
    changed, _ = change(held)
    want = {f"gpu-{i}" for i in changed}
    with watching(kube) as rules:
        kube.patch(f"{NPG}/{pool}", {"spec": split(changed)})
        eventually(lambda: blocked(kube, held.node), 150, f"{held.node} held up by the PDB")
        eventually(lambda: rules.on(held.node) == want, 30, f"rules for exactly {sorted(want)}")
        kube.patch(f"{NPG}/{pool}", {"spec": WHOLE})  # reverted: nothing changes any more
        wait_ready(kube, pool, 150, "the revert backed the node out")
        eventually(lambda: rules.count() == 0, 30, "no rule after the revert")
        assert_released(kube, pool)

        kube.patch(f"{NPG}/{pool}", {"spec": split(changed)})
        eventually(lambda: blocked(kube, held.node), 150, f"{held.node} held again")
        eventually(lambda: rules.on(held.node) == want, 30, "the rules written again")
        delete_and_wait(kube, NPG, pool)
        # the pool is gone only once its finalizer removed its rules: the list says so now
        assert kube.list(RULES, label_selector="app.kubernetes.io/managed-by=tessera") == []
        eventually(lambda: rules.count() == 0, 30, "the watcher saw them go")
    for node in pool_nodes(kube, pool):
        assert not node["spec"].get("unschedulable"), node["metadata"]["name"]
