"""What the fault tests share: a Witness of every instant, a PDB-guarded workload, pool reads.

The fault tests (``test_faults.py``: the API server, a second writer, a stuck
agent or pod; ``test_faults_kill.py``: the operator SIGKILLed) and the peering
test check the same promises, so the observers and assertions live here once.
The session's operator process is shared: a test that kills it restarts it
before it ends, whatever happens (``restarted_at_exit``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import (
    QUICK_ROLLOUT,
    DeploymentWrapper,
    GeometryWrapper,
    NodeWrapper,
    PdbWrapper,
)
from devcluster import fleet
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import condition, eventually, gpu_agents, namespace, nodes_of, running, wait_running

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
SP = "/apis/tessera.io/v1alpha1/sharingpolicies"
WORKLOAD = "faults.tessera.io/workload"  # the nodes a Workload's replicas may run on
GPUS = 8  # a simulated H100 node's: one replica fills a node


@pytest.fixture(scope="module")
def agents(kube: Kube) -> Iterator[None]:
    with gpu_agents(kube):
        yield


# -- observing ------------------------------------------------------------------------------------


@dataclass
class Witness:
    """Watches a pool's Nodes (and a workload's Pods) for the whole test; records violations.

    Built on the simulators' informer, so it re-lists after an API server
    restart instead of losing track. ``on_phase`` is called with each node
    rollout phase the moment it appears on a Node. A node counts as disrupted
    while it is NotReady, carries Tessera's taint or is cordoned; the cordon of
    a node in ``admin_cordoned`` (set by the test as someone else) counts only
    through Tessera's taint: ``worst`` is what Tessera adds to the admin's, and
    Tessera never lifts that cordon (it still counts against the budget).
    """

    kube: Kube
    pool: str
    workload: Workload | None = None
    on_phase: Callable[[str, str], None] = lambda phase, node: None
    admin_cordoned: frozenset[str] = frozenset()
    disrupted: dict[str, bool] = field(default_factory=dict)
    worst: int = 0
    layouts: dict[str, list[str]] = field(default_factory=dict)  # node -> mig.config values seen
    phases: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _informers: list[Informer] = field(default_factory=list)

    def __enter__(self) -> Witness:
        self._informers.append(Informer(self.kube, "/api/v1/nodes", self._node, name="witness"))
        if self.workload is not None:
            self._informers.append(self.workload.informer())
        for informer in self._informers:
            informer.start()
        for informer in self._informers:
            eventually(informer.synced.is_set, 30, f"{informer.name} synced")
        if self.workload is not None:
            self.workload.arm()
        return self

    def __exit__(self, *_: object) -> None:
        for informer in self._informers:
            informer.stop()

    def _node(self, kind: str, node: Obj) -> None:
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        if labels.get(c.POOL_LABEL) != self.pool:
            return
        name = meta["name"]
        ready = any(
            x.get("type") == "Ready" and x.get("status") == "True"
            for x in (node.get("status") or {}).get("conditions") or []
        )
        phase = (meta.get("annotations") or {}).get(c.NODE_PHASE_ANNOTATION)
        with self._lock:
            if kind == "DELETED":
                self.disrupted.pop(name, None)
                return
            cordoned = bool(node["spec"].get("unschedulable")) and name not in self.admin_cordoned
            tainted = any(
                t.get("key") == c.GEOMETRY_PENDING_TAINT for t in node["spec"].get("taints") or []
            )
            self.disrupted[name] = cordoned or tainted or not ready
            self.worst = max(self.worst, sum(self.disrupted.values()))
            seen = self.layouts.setdefault(name, [])
            layout = labels.get(c.MIG_CONFIG_LABEL)
            if layout and (not seen or seen[-1] != layout):
                seen.append(layout)
            if phase:
                self.phases.add(phase)
        if phase:
            self.on_phase(phase, name)


class Workload:
    """A Deployment ``train`` with one replica on each of ``nodes`` under a PDB of
    ``minAvailable: n - 1``, and a spare node outside the pool where evicted replicas go.

    Each replica asks for all 8 GPUs of a node, and the Deployment selects the nodes labelled
    ``faults.tessera.io/workload=<ns>``: first ``nodes`` (so kube-scheduler puts one replica on
    each), then, once they all run, a spare node outside every pool with room for all of them.
    A replica the rollout evicts is re-created by the ReplicaSet controller and can only land on
    the spare (a labelled pool node is either still full or, once changed to MIG, offers no
    ``nvidia.com/gpu``), so every pod a rollout should evict is an original, each exactly once,
    and a second eviction, or one outside the pool, would show.
    """

    def __init__(self, kube: Kube, ns: str, nodes: list[str]) -> None:
        self.kube, self.ns = kube, ns
        self.replicas = len(nodes)
        self.min_available = len(nodes) - 1
        self.originals: dict[str, str] = {}  # uid -> name
        self.evicted: dict[str, str] = {}  # uid -> name, first seen terminating or gone
        self.ready: dict[str, bool] = {}
        self.fewest_ready = len(nodes)
        self.armed = False
        self._lock = threading.Lock()
        namespace(kube, ns)
        for node in nodes:
            kube.patch(path_of("v1", "nodes", node), {"metadata": {"labels": {WORKLOAD: ns}}})
        budget = PdbWrapper("train").match(app="train").min_available(self.min_available).obj()
        kube.create(path_of("policy/v1", "poddisruptionbudgets", namespace=ns), budget)
        train = DeploymentWrapper("train").limits({"nvidia.com/gpu": GPUS}).replicas(self.replicas)
        train.node_selector({WORKLOAD: ns})
        kube.create(path_of("apps/v1", "deployments", namespace=ns), train.obj())
        pods = wait_running(kube, ns, "train", self.replicas)
        assert sorted(nodes_of(pods)) == sorted(nodes), nodes_of(pods)
        self.originals = {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods}
        spare = NodeWrapper.simulated(fleet.NodeSpec(f"{ns}-spare", "H100-80GB", GPUS * len(nodes)))
        # no GPU labels (no agent changes it) and no pool: only this workload lands there
        spare.relabel({"kubernetes.io/hostname": f"{ns}-spare", WORKLOAD: ns})
        fleet.create_from_manifests(kube, [spare.obj()])
        eventually(self._settled, 60, f"the PDB of {ns} counting its {self.replicas} pods")

    def _settled(self) -> bool:
        budget = self.kube.get(path_of("policy/v1", "poddisruptionbudgets", "train", self.ns))
        return (budget.get("status") or {}).get("currentHealthy") == self.replicas

    def informer(self) -> Informer:
        return Informer(
            self.kube, path_of("v1", "pods", namespace=self.ns), self._seen, name="workload"
        )

    def _seen(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        uid, name = meta["uid"], meta["name"]
        gone = kind == "DELETED" or bool(meta.get("deletionTimestamp"))
        with self._lock:
            if gone:
                self.evicted.setdefault(uid, name)
            self.ready[uid] = not gone and running(pod)
            if self.armed:
                self.fewest_ready = min(self.fewest_ready, sum(self.ready.values()))

    def arm(self) -> None:
        """Count ready replicas from now on (the initial listing delivers them one by one)."""
        with self._lock:
            self.fewest_ready = sum(self.ready.values())
            self.armed = True

    def check(self, *, on_spare: bool = True) -> None:
        """Every original evicted exactly once, no replacement evicted, the PDB never broken,
        and every evicted replica running again (on the spare, unless ``on_spare`` is off)."""
        assert self.evicted == self.originals, (self.evicted, self.originals)
        assert self.fewest_ready >= self.min_available, self.fewest_ready
        pods = wait_running(self.kube, self.ns, "train", self.replicas)
        if on_spare:
            assert set(nodes_of(pods)) == {f"{self.ns}-spare"}, nodes_of(pods)


# -- acting on the operator -----------------------------------------------------------------------


@contextmanager
def restarted_at_exit(operator: OperatorProcess) -> Iterator[None]:
    """Whatever a test did to the shared operator, it runs again when the test ends."""
    mark = len(operator.log())
    try:
        yield
    finally:
        if operator.proc is None or operator.proc.poll() is not None:
            operator.start()
    tracebacks = operator.log()[mark:].count("Traceback")
    assert tracebacks == 0, operator.log()[mark:][-6000:]


def kill_and_restart(operator: OperatorProcess) -> None:
    operator.kill()
    operator.start()


# -- reading the pool -----------------------------------------------------------------------------


def pool_spec(pool: str, layout: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    quick = GeometryWrapper(pool).layout(layout).rollout(**QUICK_ROLLOUT)
    quick.rollout(verifyTimeout="1m")
    spec: dict[str, Any] = quick.rollout(**rollout).obj()["spec"]
    return spec


def npg(kube: Kube, name: str) -> Obj | None:
    return kube.get_or_none(f"{NPG}/{name}")


def ready(kube: Kube, name: str) -> Obj | None:
    obj = npg(kube, name)
    cond = condition(obj, "Ready")
    fresh = obj and obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return obj if fresh and cond and cond["status"] == "True" else None


def wait_ready(kube: Kube, name: str, timeout: float, what: str) -> Obj:
    """The pool once Ready for its generation; on timeout the failure shows status and nodes."""
    try:
        return eventually(lambda: ready(kube, name), timeout, what)
    except AssertionError as err:
        status = json.dumps((npg(kube, name) or {}).get("status"), indent=1)
        nodes = {
            n["metadata"]["name"]: (
                (n["metadata"].get("annotations") or {}).get(c.NODE_STATE_ANNOTATION),
                n["metadata"]["labels"].get(c.MIG_CONFIG_STATE_LABEL),
            )
            for n in pool_nodes(kube, name)
        }
        pdbs = {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": p.get("status")
            for p in kube.list("/apis/policy/v1/poddisruptionbudgets")
            if p["metadata"]["namespace"].startswith(name)
        }
        pods = {
            f"{p['metadata']['name']}@{p['spec'].get('nodeName')}": p["status"].get("phase")
            for p in kube.list("/api/v1/pods")
            if p["metadata"]["namespace"].startswith(name)
        }
        raise AssertionError(
            f"{err}\nstatus: {status}\nnodes: {nodes}\npdbs: {pdbs}\npods: {pods}"
        ) from None


def stalled(kube: Kube, name: str) -> dict[str, Any] | None:
    obj = npg(kube, name)
    cond = condition(obj, "Stalled")
    fresh = obj and obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return cond if fresh and cond and cond["status"] == "True" else None


def pool_nodes(kube: Kube, pool: str) -> list[Obj]:
    return kube.list("/api/v1/nodes", label_selector=f"{c.POOL_LABEL}={pool}")


def node_of(kube: Kube, name: str) -> Obj:
    return kube.get(path_of("v1", "nodes", name))


def assert_released(kube: Kube, pool: str, admin_cordoned: frozenset[str] = frozenset()) -> None:
    """Tessera left nothing behind: no cordon of its own, no taint (pending or queued), no
    rollout state."""
    for node in pool_nodes(kube, pool):
        name = node["metadata"]["name"]
        held = bool(node["spec"].get("unschedulable"))
        assert held == (name in admin_cordoned), (name, node["metadata"].get("annotations"))
        taints = [t["key"] for t in node["spec"].get("taints") or []]
        assert not [t for t in taints if t.startswith("tessera.io/")], (name, taints)  # queued too
        annotations = node["metadata"].get("annotations") or {}
        assert c.NODE_STATE_ANNOTATION not in annotations, name
        assert c.NODE_PHASE_ANNOTATION not in annotations, name


def assert_each_layout_requested_once(witness: Witness, kube: Kube, pool: str) -> None:
    for node in pool_nodes(kube, pool):
        name = node["metadata"]["name"]
        wanted = node["metadata"]["labels"][c.MIG_CONFIG_LABEL]
        assert witness.layouts.get(name) == [wanted], (name, witness.layouts.get(name))
        assert node["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] == "success", name


def sp_ready(kube: Kube, name: str) -> bool:
    obj = kube.get(f"{SP}/{name}")
    cond = condition(obj, "Ready")
    fresh = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return bool(fresh and cond and cond["status"] == "True")


def events(kube: Kube, name: str, reason: str) -> list[Obj]:
    events = kube.list(
        "/api/v1/namespaces/default/events", field_selector=f"involvedObject.name={name}"
    )
    return [e for e in events if e.get("reason") == reason]
