"""Faults injected into rollouts on the real control plane, and the promises that must survive them.

Each test breaks one thing — the API server restarts, a second writer fights
over a node label, the operator is SIGKILLed (every few seconds, or in one
chosen rollout phase), the MIG manager hangs in ``pending``, a pod never
finishes terminating — and then checks what a cluster owner would check:

* the pool converges (or, where the fault is permanent, stops with a condition
  that names the node or pod and says why);
* never more nodes disrupted than ``maxUnavailable``, watched at every instant;
* no PodDisruptionBudget broken: the ready replicas never drop below
  ``minAvailable``;
* each pod evicted at most once (an evicted pod comes back as a new pod on a
  spare node outside the pool, so any second eviction would show);
* each node's layout requested once (no double reconfiguration);
* no node left cordoned or tainted by Tessera, and a node an admin cordoned
  still cordoned.

The session's operator process is shared: a test that kills it restarts it
before it ends, whatever happens.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.api import constants as c
from tessera.devcluster import fleet, gpunode, kubelet
from tessera.devcluster.controlplane import ControlPlane

from .conftest import OperatorProcess
from .helpers import condition, custom, eventually, gpu_agents, gpu_pod, namespace

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
SP = "/apis/tessera.io/v1alpha1/sharingpolicies"
LAYOUT_A = {"mig": {"layouts": [{"profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]}}
LAYOUT_B = {"mig": {"layouts": [{"profiles": {"1g.10gb": 7}}]}}
SPARE = "faults-spare"  # where evicted pods come back: outside every pool


@pytest.fixture(scope="module")
def agents(kube: Kube) -> Iterator[None]:
    spare = fleet.node_manifest(fleet.NodeSpec(SPARE, "H100-80GB"))
    spare["metadata"]["labels"] = {"kubernetes.io/hostname": SPARE}  # no GPU labels: no agent
    try:
        kube.create("/api/v1/nodes", spare)
    except ApiError as err:
        if not err.conflict:
            raise
    with gpu_agents(kube):
        yield


# -- observing ------------------------------------------------------------------------------------


@dataclass
class Witness:
    """Watches a pool's Nodes (and a workload's Pods) for the whole test; records violations.

    Built on the simulators' informer, so it re-lists after an API server
    restart instead of losing track. ``on_phase`` is called with each node
    rollout phase the moment it appears on a Node.
    """

    kube: Kube
    pool: str
    workload: Workload | None = None
    on_phase: Callable[[str, str], None] = lambda phase, node: None
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
        if self.workload is not None:
            self.workload.stopped.set()

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
            self.disrupted[name] = bool(node["spec"].get("unschedulable")) or not ready
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
    """GPU pods owned by a ReplicaSet, one per node, under a PDB of ``minAvailable: n - 1``.

    No ReplicaSet controller or scheduler runs in the test control plane, so
    this plays both: a deleted pod ``train-0`` comes back as ``train-0-again``
    on the spare node outside the pool. So every pod a rollout should evict is
    an original, each exactly once. (Not under the same name: after an API
    server restart the disruption controller may have missed the deletion and
    counts a pod of the old name as disrupted for its two-minute grace.) Like a
    real controller it works from levels (which replicas are missing), so an
    API server restart that swallows a DELETED event loses no replica.
    """

    def __init__(self, kube: Kube, ns: str, nodes: list[str]) -> None:
        self.kube, self.ns = kube, ns
        self.min_available = len(nodes) - 1
        self.originals: dict[str, str] = {}  # uid -> name
        self.evicted: dict[str, str] = {}  # uid -> name, first seen terminating or gone
        self.ready: dict[str, bool] = {}
        self.fewest_ready = len(nodes)
        self.armed = False
        self._lock = threading.Lock()
        self.stopped = threading.Event()
        self.replacer = threading.Thread(target=self._replace, daemon=True, name="replicaset")
        namespace(kube, ns)
        owner = kube.create(
            f"/apis/apps/v1/namespaces/{ns}/replicasets",
            {
                "metadata": {"name": "train"},
                "spec": {
                    "replicas": len(nodes),
                    "selector": {"matchLabels": {"app": "train"}},
                    "template": {
                        "metadata": {"labels": {"app": "train"}},
                        "spec": {"containers": [{"name": "main", "image": "cuda"}]},
                    },
                },
            },
        )
        self.owner_ref = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "train",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        for i, node in enumerate(nodes):
            pod = kube.create(path_of("v1", "pods", namespace=ns), self._pod(f"train-{i}", node))
            self.originals[pod["metadata"]["uid"]] = pod["metadata"]["name"]
        kube.create(
            f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
            {
                "metadata": {"name": "train"},
                "spec": {
                    "minAvailable": self.min_available,
                    "selector": {"matchLabels": {"app": "train"}},
                },
            },
        )
        eventually(self._settled, 60, f"pods of {ns} running and their PDB counting them")

    def _pod(self, name: str, node: str) -> Obj:
        return gpu_pod(name, node=node, labels={"app": "train"}, ownerReferences=[self.owner_ref])

    def _settled(self) -> bool:
        pdb = self.kube.get(path_of("policy/v1", "poddisruptionbudgets", "train", self.ns))
        return (pdb.get("status") or {}).get("currentHealthy") == len(self.originals)

    def informer(self) -> Informer:
        return Informer(
            self.kube, path_of("v1", "pods", namespace=self.ns), self._seen, name="workload"
        )

    def _seen(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        uid, name = meta["uid"], meta["name"]
        gone = kind == "DELETED" or bool(meta.get("deletionTimestamp"))
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = not gone and any(
            x.get("type") == "Ready" and x.get("status") == "True" for x in conditions
        )
        with self._lock:
            if gone:
                self.evicted.setdefault(uid, name)
            self.ready[uid] = ready
            if self.armed:
                self.fewest_ready = min(self.fewest_ready, sum(self.ready.values()))

    def arm(self) -> None:
        """Count ready replicas from now on (the initial listing delivers them one by one)."""
        with self._lock:
            self.fewest_ready = sum(self.ready.values())
            self.armed = True
        self.replacer.start()

    def _replace(self) -> None:
        names = set(self.originals.values())
        collection = path_of("v1", "pods", namespace=self.ns)
        while not self.stopped.wait(0.2):  # the simulated controller's resync period
            try:
                present = {p["metadata"]["name"] for p in self.kube.list(collection)}
                for name in sorted(names - present):
                    if f"{name}-again" not in present:
                        self.kube.create(collection, self._pod(f"{name}-again", SPARE))
            except ApiError:
                continue  # API server away or a name taken meanwhile: next round

    def check(self) -> None:
        """Every original evicted exactly once, no replacement evicted, the PDB never broken."""
        assert self.evicted == self.originals, (self.evicted, self.originals)
        assert self.fewest_ready >= self.min_available, self.fewest_ready


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


def _spec(pool: str, layout: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    return {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}},
        **layout,
        "rollout": {"verifyTimeout": "1m", "drain": {"timeout": "1m"}, **rollout},
    }


def _npg(kube: Kube, name: str) -> Obj | None:
    return kube.get_or_none(f"{NPG}/{name}")


def _ready(kube: Kube, name: str) -> Obj | None:
    obj = _npg(kube, name)
    cond = condition(obj, "Ready")
    fresh = obj and obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return obj if fresh and cond and cond["status"] == "True" else None


def wait_ready(kube: Kube, name: str, timeout: float, what: str) -> Obj:
    """The pool once Ready for its generation; on timeout the failure shows status and nodes."""
    try:
        return eventually(lambda: _ready(kube, name), timeout, what)
    except AssertionError as err:
        status = json.dumps((_npg(kube, name) or {}).get("status"), indent=1)
        nodes = {
            n["metadata"]["name"]: (
                (n["metadata"].get("annotations") or {}).get(c.NODE_STATE_ANNOTATION),
                n["metadata"]["labels"].get(c.MIG_CONFIG_STATE_LABEL),
            )
            for n in _nodes(kube, name)
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


def _stalled(kube: Kube, name: str) -> dict[str, Any] | None:
    obj = _npg(kube, name)
    cond = condition(obj, "Stalled")
    fresh = obj and obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return cond if fresh and cond and cond["status"] == "True" else None


def _nodes(kube: Kube, pool: str) -> list[Obj]:
    return kube.list("/api/v1/nodes", label_selector=f"{c.POOL_LABEL}={pool}")


def _node(kube: Kube, name: str) -> Obj:
    return kube.get(path_of("v1", "nodes", name))


def assert_released(kube: Kube, pool: str, admin_cordoned: frozenset[str] = frozenset()) -> None:
    """Tessera left nothing behind: no cordon of its own, no taint, no rollout state."""
    for node in _nodes(kube, pool):
        name = node["metadata"]["name"]
        held = bool(node["spec"].get("unschedulable"))
        assert held == (name in admin_cordoned), (name, node["metadata"].get("annotations"))
        taints = [t["key"] for t in node["spec"].get("taints") or []]
        assert c.GEOMETRY_PENDING_TAINT not in taints, name
        annotations = node["metadata"].get("annotations") or {}
        assert c.NODE_STATE_ANNOTATION not in annotations, name
        assert c.NODE_PHASE_ANNOTATION not in annotations, name


def assert_each_layout_requested_once(witness: Witness, kube: Kube, pool: str) -> None:
    for node in _nodes(kube, pool):
        name = node["metadata"]["name"]
        wanted = node["metadata"]["labels"][c.MIG_CONFIG_LABEL]
        assert witness.layouts.get(name) == [wanted], (name, witness.layouts.get(name))
        assert node["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] == "success", name


# -- the faults -----------------------------------------------------------------------------------


def test_api_server_restart_mid_rollout(
    kube: Kube,
    operator: OperatorProcess,
    control_plane: ControlPlane,
    agents: None,
    tmp_path: Path,
) -> None:
    """The operator runs on its own log here: while a restarted API server warms its RBAC
    cache it answers 403 for a moment, which the operator must log (and survive), and
    which the session's log would rightly count as a missing permission."""
    pool = "flt-apiserver"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 4))
    work = Workload(kube, f"{pool}-ns", names[:2])
    verifying = threading.Event()
    witness = Witness(kube, pool, work, lambda p, _: p == "Verifying" and verifying.set())
    private = OperatorProcess(
        control_plane, tmp_path / "operator.log", kubeconfig=operator.kubeconfig
    )
    operator.kill()
    try:
        private.start()
        with witness:
            spec = _spec(pool, LAYOUT_A, maxUnavailable=2)
            kube.create(NPG, custom("NodePoolGeometry", pool, spec))
            eventually(verifying.is_set, 60, "a node verifying its new layout")
            control_plane.restart_apiserver()
            obj = wait_ready(kube, pool, 180, f"{pool} Ready after the restart")
    finally:
        private.stop()
        operator.start()
    assert "Traceback" not in private.log(), private.log()[-6000:]
    assert obj["status"]["nodes"]["updated"] == 4
    assert witness.worst <= 2, witness.worst
    work.check()
    assert_released(kube, pool)
    assert_each_layout_requested_once(witness, kube, pool)


class LabelFighter(threading.Thread):
    """A second writer that keeps setting one node label to its own value.

    It writes the way a careful controller does, GET then PUT with the
    resourceVersion it read, so whenever Tessera (or an agent) writes the node
    in between it gets 409 Conflict and tries again.
    """

    def __init__(self, kube: Kube, nodes: list[str], key: str, value: str) -> None:
        super().__init__(daemon=True, name="label-fighter")
        self.kube, self.nodes, self.key, self.value = kube, nodes, key, value
        self.stopped = threading.Event()
        self.won = 0
        self.conflicts = 0

    def run(self) -> None:
        for name in itertools.cycle(self.nodes):
            if self.stopped.is_set():
                return
            node = self.kube.get(path_of("v1", "nodes", name))
            self.stopped.wait(0.05)  # a slow reconcile between its read and its write
            node["metadata"]["labels"][self.key] = self.value
            try:
                self.kube.replace(path_of("v1", "nodes", name), node)
                self.won += 1
            except ApiError as err:
                if not err.conflict:
                    raise
                self.conflicts += 1


def test_second_writer_fighting_over_a_node_label(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool = "flt-fight"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 3))
    policy = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}},
        "backend": "TimeSlicing",
        "timeSlicing": {"replicas": 2},
    }
    fighter = LabelFighter(kube, names, c.DEVICE_PLUGIN_CONFIG_LABEL, "someone-elses-config")
    with restarted_at_exit(operator), Witness(kube, pool) as witness:
        kube.create(SP, custom("SharingPolicy", pool, policy))
        key = eventually(
            lambda: (kube.get(f"{SP}/{pool}").get("status") or {}).get("configKey"),
            60,
            "the policy's config key",
        )
        kube.create(NPG, custom("NodePoolGeometry", pool, _spec(pool, LAYOUT_A)))
        fighter.start()
        try:
            eventually(lambda: fighter.conflicts >= 3 and fighter.won >= 3, 60, "a real fight")
        finally:
            fighter.stopped.set()
            fighter.join(10)
        wait_ready(kube, pool, 120, f"{pool} Ready once the fight is over")

        def restored() -> bool:
            return all(
                _node(kube, n)["metadata"]["labels"].get(c.DEVICE_PLUGIN_CONFIG_LABEL) == key
                for n in names
            )

        eventually(restored, 60, "Tessera's config label back on every node")
        eventually(lambda: _sp_ready(kube, pool), 60, "SharingPolicy Ready")
        restores = eventually(lambda: _events(kube, pool, "DriftRestored"), 30, "DriftRestored")
        assert any(n in e["message"] for e in restores for n in names), restores
    assert witness.worst <= 1, witness.worst
    assert_released(kube, pool)
    for name in names:  # the fight never reached the layout: requested once per node
        assert len(witness.layouts[name]) == 1, witness.layouts[name]


def _sp_ready(kube: Kube, name: str) -> bool:
    obj = kube.get(f"{SP}/{name}")
    cond = condition(obj, "Ready")
    fresh = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
    return bool(fresh and cond and cond["status"] == "True")


def _events(kube: Kube, name: str, reason: str) -> list[Obj]:
    events = kube.list(
        "/api/v1/namespaces/default/events", field_selector=f"involvedObject.name={name}"
    )
    return [e for e in events if e.get("reason") == reason]


def test_operator_sigkilled_every_few_seconds_through_a_30_node_rollout(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool = "flt-kill30"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 30))
    work = Workload(kube, f"{pool}-ns", names[::3])  # 10 pods under minAvailable 9
    stop = threading.Event()
    kills = 0

    def killer() -> None:
        nonlocal kills
        while not stop.wait(3.0):  # the fault's period, not synchronisation
            kill_and_restart(operator)
            kills += 1

    thread = threading.Thread(target=killer, daemon=True, name="killer")
    with restarted_at_exit(operator), Witness(kube, pool, work) as witness:
        kube.create(NPG, custom("NodePoolGeometry", pool, _spec(pool, LAYOUT_A, maxUnavailable=5)))
        thread.start()
        try:
            obj = wait_ready(kube, pool, 240, f"{pool} Ready despite the kills")
        finally:
            stop.set()
            thread.join(60)
    assert kills >= 3, kills
    assert obj["status"]["nodes"]["updated"] == 30
    assert witness.worst <= 5, witness.worst
    work.check()
    assert_released(kube, pool)
    assert_each_layout_requested_once(witness, kube, pool)


# Every phase a node is persisted in on its way through a rollout. Applying is persisted
# only when a layout is re-applied (a rollback, a spec changed mid-flight): a drained node
# goes from Draining straight to Verifying in the pass whose fresh pod list found it empty.
# Uncordoning never reaches the API server: the executor sends a node's release (state,
# taint, cordon, clear) as one patch, so there is no moment between them to be killed in.
PHASES = ["Cordoned", "Draining", "Verifying"]


@pytest.mark.parametrize("phase", PHASES)
def test_operator_sigkilled_in_each_phase_resumes(
    kube: Kube, operator: OperatorProcess, agents: None, phase: str
) -> None:
    pool = f"flt-phase-{phase.lower()}"
    specs = fleet.pool(pool, "H100-80GB", 2)
    admin = fleet.NodeSpec(f"{pool}-admin", "H100-80GB", pool=pool, unschedulable=True)
    names = fleet.create_nodes(kube, [*specs, admin])
    work = Workload(kube, f"{pool}-ns", names[:2])
    killed = threading.Event()

    def trip(seen: str, _: str) -> None:
        if seen == phase and not killed.is_set():
            operator.kill()
            killed.set()

    with restarted_at_exit(operator), Witness(kube, pool, work, trip) as witness:
        kube.create(NPG, custom("NodePoolGeometry", pool, _spec(pool, LAYOUT_A, maxUnavailable=2)))
        eventually(killed.is_set, 60, f"a node in phase {phase}")
        operator.start()
        # 90 s, plus 120 s when the kill cut an eviction in half: the API server had
        # granted it (the PDB counts the pod as disrupted) but the client went away
        # before the pod was deleted, and the disruption controller keeps that grant
        # for two minutes before the budget frees and the drain goes on.
        obj = wait_ready(kube, pool, 210, f"{pool} Ready after the kill")
    assert obj["status"]["nodes"]["updated"] == 3
    assert witness.worst <= 2, witness.worst
    work.check()
    assert_released(kube, pool, admin_cordoned=frozenset({admin.name}))
    assert_each_layout_requested_once(witness, kube, pool)


def test_mig_manager_stuck_pending_fails_after_verify_timeout(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool = "flt-stuck"
    (name,) = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    with restarted_at_exit(operator), Witness(kube, pool) as witness:
        kube.create(NPG, custom("NodePoolGeometry", pool, _spec(pool, LAYOUT_A)))
        wait_ready(kube, pool, 60, "the first layout applied")
        kube.patch(
            path_of("v1", "nodes", name), {"metadata": {"annotations": {gpunode.STUCK: "true"}}}
        )
        kube.patch(f"{NPG}/{pool}", {"spec": {**LAYOUT_B, "rollout": {"verifyTimeout": "3s"}}})

        cond = eventually(lambda: _stalled(kube, pool), 60, "Stalled after verifyTimeout")
        assert cond["reason"] == "NodeFailed", cond
        assert name in cond["message"] and "not verified within 3s" in cond["message"], cond
        node = _node(kube, name)
        assert node["metadata"]["annotations"][c.NODE_PHASE_ANNOTATION] == "Failed"
        assert node["spec"].get("unschedulable") is True  # onFailure: Hold keeps it out
        assert node["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] == "pending"

        # The remedy a person takes: fix the agent and revert the spec (git revert).
        kube.patch(
            path_of("v1", "nodes", name), {"metadata": {"annotations": {gpunode.STUCK: None}}}
        )
        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_A})
        wait_ready(kube, pool, 60, f"{pool} Ready after the revert")
        assert (condition(_npg(kube, pool), "Stalled") or {}).get("status") != "True"
    assert witness.worst <= 1, witness.worst
    assert_released(kube, pool)


def test_pod_stuck_terminating_blocks_the_drain_naming_the_pod(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool = "flt-terminating"
    (name,) = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    ns = f"{pool}-ns"
    namespace(kube, ns)
    stuck = {kubelet.STUCK_ANNOTATION: "true"}
    kube.create(
        path_of("v1", "pods", namespace=ns), gpu_pod("sticky", node=name, annotations=stuck)
    )
    pod_path = path_of("v1", "pods", "sticky", ns)
    eventually(lambda: kube.get(pod_path)["status"].get("phase") == "Running", what="pod running")
    with restarted_at_exit(operator), Witness(kube, pool) as witness:
        spec = _spec(pool, LAYOUT_A)
        spec["rollout"]["drain"] = {"timeout": "3s", "force": True}  # a bare pod: force to evict
        kube.create(NPG, custom("NodePoolGeometry", pool, spec))

        cond = eventually(lambda: _stalled(kube, pool), 60, "Stalled after the drain timeout")
        assert cond["reason"] == "DrainBlocked", cond
        assert f"pod {ns}/sticky is terminating" in cond["message"], cond
        node = _node(kube, name)
        assert node["metadata"]["annotations"][c.NODE_PHASE_ANNOTATION] == "Blocked"
        assert node["spec"].get("unschedulable") is True
        assert c.MIG_CONFIG_LABEL not in node["metadata"]["labels"]  # nothing reconfigured
        pod = kube.get(pod_path)
        assert pod["metadata"].get("deletionTimestamp")  # evicted, never force-deleted

        kube.patch(pod_path, {"metadata": {"annotations": {kubelet.STUCK_ANNOTATION: None}}})
        wait_ready(kube, pool, 60, f"{pool} Ready once the pod is gone")
    assert witness.worst <= 1, witness.worst
    assert_released(kube, pool)
    assert_each_layout_requested_once(witness, kube, pool)
