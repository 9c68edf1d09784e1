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

The SIGKILL faults are in ``test_faults_kill.py``; the observers and
assertions both use are in ``faults.py``.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from builders import LAYOUT_A, LAYOUT_B, custom
from devcluster import fleet, gpunode
from devcluster.controlplane import ControlPlane
from devcluster.scheduling import STUCK_ANNOTATION
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .faults import (
    NPG,
    SP,
    Witness,
    Workload,
    agents,
    assert_each_layout_requested_once,
    assert_released,
    events,
    node_of,
    npg,
    pool_spec,
    restarted_at_exit,
    sp_ready,
    stalled,
    wait_ready,
)
from .helpers import condition, eventually

__all__ = ["agents"]  # the module-scoped fixture, used by every test below


def test_api_server_restart_mid_rollout(
    kube: Kube,
    operator: OperatorProcess,
    control_plane: ControlPlane,
    agents: None,
    tmp_path: Path,
) -> None:
    """The operator runs on its own log here: while a restarted API server warms its RBAC
    cache it answers 403 for a moment, which the operator must log (and survive), and
    which the session's log would rightly count as a missing permission. Its own log
    forgives those refusals until the API server is ready again, none after."""
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
            spec = pool_spec(pool, LAYOUT_A, maxUnavailable=2)
            kube.create(NPG, custom("NodePoolGeometry", pool, spec))
            eventually(verifying.is_set, 60, "a node verifying its new layout")
            control_plane.restart_apiserver()  # returns once /readyz answers ok
            ready_again = len(private.log())
            obj = wait_ready(kube, pool, 180, f"{pool} Ready after the restart")
    finally:
        private.stop()
        operator.start()
    private.assert_clean_log(denials_from=ready_again)
    assert obj["status"]["nodes"]["updated"] == 4
    assert witness.worst <= 2, witness.worst
    # Where a replacement lands is not checked here: once, a replica evicted after the restart
    # was placed on a pool node already changed to MIG, which a simulator (device plugin or
    # KWOK re-listing after the restart) advertised whole GPUs on again. Tessera's part, each
    # original evicted once and no replacement evicted, is checked by uid all the same.
    work.check(on_spare=False)
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
        kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
        fighter.start()
        try:
            eventually(lambda: fighter.conflicts >= 3 and fighter.won >= 3, 60, "a real fight")
        finally:
            fighter.stopped.set()
            fighter.join(10)
        wait_ready(kube, pool, 120, f"{pool} Ready once the fight is over")

        def restored() -> bool:
            return all(
                node_of(kube, n)["metadata"]["labels"].get(c.DEVICE_PLUGIN_CONFIG_LABEL) == key
                for n in names
            )

        eventually(restored, 60, "Tessera's config label back on every node")
        eventually(lambda: sp_ready(kube, pool), 60, "SharingPolicy Ready")
        restores = eventually(lambda: events(kube, pool, "DriftRestored"), 30, "DriftRestored")
        assert any(n in e["message"] for e in restores for n in names), restores
    assert witness.worst <= 1, witness.worst
    assert_released(kube, pool)
    for name in names:  # the fight never reached the layout: requested once per node
        assert len(witness.layouts[name]) == 1, witness.layouts[name]


def test_mig_manager_stuck_pending_fails_after_verify_timeout(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool = "flt-stuck"
    (name,) = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    with restarted_at_exit(operator), Witness(kube, pool) as witness:
        kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
        wait_ready(kube, pool, 60, "the first layout applied")
        kube.patch(
            path_of("v1", "nodes", name), {"metadata": {"annotations": {gpunode.STUCK: "true"}}}
        )
        kube.patch(f"{NPG}/{pool}", {"spec": {**LAYOUT_B, "rollout": {"verifyTimeout": "3s"}}})

        cond = eventually(lambda: stalled(kube, pool), 60, "Stalled after verifyTimeout")
        assert cond["reason"] == "NodeFailed", cond
        assert name in cond["message"] and "not verified within 3s" in cond["message"], cond
        node = node_of(kube, name)
        assert node["metadata"]["annotations"][c.NODE_PHASE_ANNOTATION] == "Failed"
        assert node["spec"].get("unschedulable") is True  # onFailure: Hold keeps it out
        assert node["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] == "pending"

        # The remedy a person takes: fix the agent and revert the spec (git revert).
        kube.patch(
            path_of("v1", "nodes", name), {"metadata": {"annotations": {gpunode.STUCK: None}}}
        )
        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_A})
        wait_ready(kube, pool, 60, f"{pool} Ready after the revert")
        assert (condition(npg(kube, pool), "Stalled") or {}).get("status") != "True"
    assert witness.worst <= 1, witness.worst
    assert_released(kube, pool)


def test_pod_stuck_terminating_blocks_the_drain_naming_the_pod(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool = "flt-terminating"
    (name,) = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    ns = f"{pool}-ns"
    work = Workload(kube, ns, [name])
    (sticky,) = work.originals.values()
    pod_path = path_of("v1", "pods", sticky, ns)
    # the fault: the node's runtime will never finish stopping this replica
    kube.patch(pod_path, {"metadata": {"annotations": {STUCK_ANNOTATION: "true"}}})
    with restarted_at_exit(operator), Witness(kube, pool, work) as witness:
        spec = pool_spec(pool, LAYOUT_A)
        spec["rollout"]["drain"] = {"timeout": "3s"}
        kube.create(NPG, custom("NodePoolGeometry", pool, spec))

        cond = eventually(lambda: stalled(kube, pool), 60, "Stalled after the drain timeout")
        assert cond["reason"] == "DrainBlocked", cond
        assert f"pod {ns}/{sticky} is terminating" in cond["message"], cond
        node = node_of(kube, name)
        assert node["metadata"]["annotations"][c.NODE_PHASE_ANNOTATION] == "Blocked"
        assert node["spec"].get("unschedulable") is True
        assert c.MIG_CONFIG_LABEL not in node["metadata"]["labels"]  # nothing reconfigured
        pod = kube.get(pod_path)
        assert pod["metadata"].get("deletionTimestamp")  # evicted, never force-deleted
        assert pod["spec"]["nodeName"] == name

        kube.patch(pod_path, {"metadata": {"annotations": {STUCK_ANNOTATION: None}}})
        wait_ready(kube, pool, 60, f"{pool} Ready once the pod is gone")
    assert witness.worst <= 1, witness.worst
    work.check()
    assert_released(kube, pool)
    assert_each_layout_requested_once(witness, kube, pool)
