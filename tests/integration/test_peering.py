"""Two live replicas under kopf peering, run the way config/manager runs them.

The Deployment runs two replicas of ``tessera run --peering=tessera --priority=<n>``.
Here two real operator processes, with the ServiceAccount token of config/rbac,
join one ClusterKopfPeering: replica A (priority 200) and then replica B
(priority 100). A pool rolls out and only A acts; B never even reads the pool.
Then A exits cleanly (SIGTERM, so kopf takes its peer record away), the pool's
layout changes, and B carries the second rollout through. Throughout, a
Witness watches that no more than ``maxUnavailable`` nodes are out at once.
Every pass of a replica under peering holds the writer Lease
(``tessera.domain.base.lease``): A holds it while active and gives it back on exit;
and a Lease held by a live stranger stops every write until it is given back.

The session's standalone operator ignores peering and would act alongside
both replicas, so it is stopped for the test and started again afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from builders import LAYOUT_A, LAYOUT_B, custom
from devcluster import fleet
from devcluster.controlplane import ControlPlane, free_port
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c
from tessera.domain.base import lease

from .conftest import ROOT, Kubectl, OperatorProcess
from .faults import Witness, restarted_at_exit, wait_ready
from .helpers import eventually, gpu_agents

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
PEERINGS = "/apis/kopf.dev/v1/clusterkopfpeerings"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/tessera-system/leases/tessera-writer"
PEERING = "tessera-peer-test"
POOL = "peer-pool"
NODES = 4
MAX_UNAVAILABLE = 2
HIGH, LOW = 200, 100
# kopf's line when a replica stops waiting (it starts paused when peering is mandatory).
RESUMED = "Resuming operations after the pause"


@pytest.fixture(scope="module")
def agents(kube: Kube) -> Iterator[None]:
    with gpu_agents(kube):
        yield


@pytest.fixture
def peering(kubectl: Kubectl, kube: Kube) -> Iterator[str]:
    """kopf's peering CRD (as config/crd installs it) and a ClusterKopfPeering of this test's own."""
    kubectl.ok("apply", "--server-side", "-f", str(ROOT / "config" / "crd" / "kopf_peering.yaml"))
    kubectl.ok(
        "wait",
        "--for=condition=Established",
        "crd/clusterkopfpeerings.kopf.dev",
        "--timeout=60s",
    )
    kube.create(
        PEERINGS,
        {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": PEERING}},
    )
    yield PEERING
    kube.delete(f"{PEERINGS}/{PEERING}")


@pytest.fixture
def pool_nodes(kube: Kube, operator: OperatorProcess) -> Iterator[list[str]]:
    """The pool's nodes; afterwards the pool (released by the session operator, running again
    by then) and its nodes are deleted, so the rest of the session does not reconcile them."""
    names = fleet.create_nodes(kube, fleet.pool(POOL, "H100-80GB", NODES))
    yield names
    kube.delete(f"{NPG}/{POOL}")
    eventually(lambda: kube.get_or_none(f"{NPG}/{POOL}") is None, 60, f"{POOL} deleted")
    for name in names:
        kube.delete(path_of("v1", "nodes", name))


def _peers(kube: Kube) -> dict[int, str]:
    """priority -> identity of the replicas recorded in the ClusterKopfPeering."""
    status = kube.get(f"{PEERINGS}/{PEERING}").get("status") or {}
    return {int(info["priority"]): ident for ident, info in status.items() if info}


def _spec(layout: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: POOL}},
        **layout,
        "rollout": {
            "maxUnavailable": MAX_UNAVAILABLE,
            "verifyTimeout": "1m",
            "drain": {"timeout": "1m"},
        },
    }


ACTION = re.compile(rf"NodePoolGeometry/{POOL}: (\w+) ({POOL}-\d+)")


def _actions(log: str, kind: str | None = None) -> list[tuple[str, str]]:
    """(action, node) for each rollout action the replica logged on this test's pool."""
    return [(a, n) for a, n in ACTION.findall(log) if kind is None or a == kind]


def _cordoned(log: str) -> set[str]:
    return {node for _, node in _actions(log, "Cordon")}


def _nodes(kube: Kube) -> list[Obj]:
    return kube.list("/api/v1/nodes", label_selector=f"{c.POOL_LABEL}={POOL}")


def _assert_layout(kube: Kube, names: list[str], profile: str, per_node: int) -> dict[str, str]:
    """Every node reconfigured, released and advertising ``profile``; returns node -> config."""
    nodes = {n["metadata"]["name"]: n for n in _nodes(kube)}
    assert sorted(nodes) == sorted(names)
    configs = {}
    for name, node in nodes.items():
        labels = node["metadata"]["labels"]
        assert labels[c.MIG_CONFIG_STATE_LABEL] == "success", (name, labels)
        assert node["status"]["allocatable"].get(f"nvidia.com/mig-{profile}") == str(per_node)
        assert not node["spec"].get("unschedulable"), name
        annotations = node["metadata"].get("annotations") or {}
        assert c.NODE_STATE_ANNOTATION not in annotations, (name, annotations)
        configs[name] = labels[c.MIG_CONFIG_LABEL]
    return configs


def _holder(kube: Kube) -> str:
    lease = kube.get_or_none(LEASE)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def _lease_gauge(replica: OperatorProcess) -> float:
    """``tessera_writer_lease_held`` as the replica's /metrics shows it."""
    text = replica.scrape()
    [value] = re.findall(r"^tessera_writer_lease_held ([0-9.]+)$", text, re.MULTILINE)
    return float(value)


def _replica(
    control_plane: ControlPlane, operator: OperatorProcess, peering: str, folder: Path
) -> Callable[[str, int], OperatorProcess]:
    def replica(name: str, priority: int) -> OperatorProcess:
        return OperatorProcess(
            control_plane,
            folder / f"replica-{name}.log",
            f"--peering={peering}",
            f"--priority={priority}",
            f"--identity=replica-{name}",
            kubeconfig=operator.kubeconfig,
            metrics_port=free_port(),
        )

    return replica


def _assert_clean(replica: OperatorProcess, who: str) -> None:
    log = replica.log()
    for bad in ("Traceback", "forbidden"):
        at = log.find(bad)
        assert at < 0, f"replica {who} logged {bad!r}:\n{log[max(at - 500, 0) : at + 3000]}"


def test_only_the_higher_priority_replica_acts_and_the_other_takes_over_when_it_exits(
    kube: Kube,
    operator: OperatorProcess,
    control_plane: ControlPlane,
    agents: None,
    peering: str,
    pool_nodes: list[str],
    tmp_path: Path,
) -> None:
    replica = _replica(control_plane, operator, peering, tmp_path)
    a, b = replica("a", HIGH), replica("b", LOW)
    with restarted_at_exit(operator), Witness(kube, POOL) as witness:
        operator.stop()
        try:
            # -- A alone: it records itself and stops waiting -----------------------------------
            a.start()
            eventually(lambda: HIGH in _peers(kube), 60, "replica A in the peering")
            eventually(lambda: RESUMED in a.log(), 60, "replica A active")
            # -- B joins, behind A --------------------------------------------------------------
            b.start()
            eventually(lambda: LOW in _peers(kube), 60, "replica B in the peering")
            assert set(_peers(kube)) == {HIGH, LOW}, _peers(kube)

            kube.create(NPG, custom("NodePoolGeometry", POOL, _spec(LAYOUT_A)))
            wait_ready(kube, POOL, 90, f"{POOL} Ready with two replicas running")
            first = _assert_layout(kube, pool_nodes, "3g.40gb", 8)
            assert _holder(kube) == "replica-a"
            assert (_lease_gauge(a), _lease_gauge(b)) == (1.0, 0.0)

            assert _cordoned(a.log()) == set(pool_nodes), _actions(a.log())
            assert b.proc is not None and b.proc.poll() is None, "replica B exited"
            assert POOL not in b.log(), f"the paused replica B touched {POOL}:\n{b.log()[-4000:]}"
            assert RESUMED not in b.log(), b.log()[-4000:]

            # -- A exits cleanly: kopf takes its record away and B takes over --------------------
            a.stop()
            assert a.proc is not None and a.proc.returncode == 0, (a.proc, a.log()[-4000:])
            assert _holder(kube) in ("", "replica-b"), _holder(kube)  # given back on exit
            eventually(lambda: HIGH not in _peers(kube), 30, "replica A's peer record removed")
            eventually(lambda: RESUMED in b.log(), 60, "replica B resuming")

            kube.patch(f"{NPG}/{POOL}", {"spec": LAYOUT_B})
            wait_ready(kube, POOL, 90, f"{POOL} Ready with the new layout, replica B alone")
            second = _assert_layout(kube, pool_nodes, "1g.10gb", 8 * 7)
            assert _cordoned(b.log()) == set(pool_nodes), _actions(b.log())
            assert _holder(kube) == "replica-b"
        finally:
            b.stop()
            a.stop()

    assert 0 < witness.worst <= MAX_UNAVAILABLE, witness.worst
    for name in pool_nodes:  # each layout requested once per node, by one replica each
        assert first[name] != second[name], (name, first[name])
        assert witness.layouts.get(name) == [first[name], second[name]], witness.layouts.get(name)
    _assert_clean(a, "A")
    _assert_clean(b, "B")


def test_a_writer_lease_held_by_a_live_stranger_stops_every_write_until_given_back(
    kube: Kube,
    operator: OperatorProcess,
    control_plane: ControlPlane,
    agents: None,
    peering: str,
    pool_nodes: list[str],
    tmp_path: Path,
) -> None:
    """The replica kopf elects still writes nothing while another holds the Lease."""
    now = datetime.now(UTC).strftime(lease.MICRO_TIME)
    stranger = {"holderIdentity": "stranger", "leaseDurationSeconds": 3600, "renewTime": now}
    current = kube.get_or_none(LEASE)
    if current is None:
        kube.create(
            LEASE.rsplit("/", 1)[0], {"metadata": {"name": "tessera-writer"}, "spec": stranger}
        )
    else:
        kube.patch(LEASE, {"spec": stranger})
    a = _replica(control_plane, operator, peering, tmp_path)("a", HIGH)
    with restarted_at_exit(operator), Witness(kube, POOL) as witness:
        operator.stop()
        try:
            a.start()
            kube.create(NPG, custom("NodePoolGeometry", POOL, _spec(LAYOUT_A)))
            eventually(lambda: "held by stranger" in a.log(), 60, "replica A waiting for the Lease")
            pool = kube.get(f"{NPG}/{POOL}")
            status = pool.get("status") or {}  # the CRD's default is observedGeneration 0
            assert not status.get("conditions"), status  # not even its status was written
            assert not _cordoned(a.log()), _actions(a.log())
            assert all(not n["spec"].get("unschedulable") for n in _nodes(kube))

            kube.patch(LEASE, {"spec": {"holderIdentity": None}})  # given back
            wait_ready(kube, POOL, 90, f"{POOL} Ready once the Lease is free")
            _assert_layout(kube, pool_nodes, "3g.40gb", 8)
            assert _holder(kube) == "replica-a"
        finally:
            a.stop()
    assert 0 < witness.worst <= MAX_UNAVAILABLE, witness.worst
    _assert_clean(a, "A")
