"""Issue 14, item 4: availability-aware rollouts, on a cluster that really schedules.

Its own control plane with kube-scheduler, every default controller and KWOK; the operator
runs under its ServiceAccount's token (config/rbac), the simulated MIG manager turns layouts
into MIG resources. Serving replicas come from Deployments placed by the scheduler. An outside
watcher checks over the whole run: never more than ``maxUnavailable`` nodes of the pool held
by Tessera, never fewer healthy replicas than the PDB's ``minAvailable``, every evicted replica
Running again at the end, nothing of Tessera's left on a node.

* a MIG change rolls through a pool whose Deployment has room to move;
* with the rest of the cluster full, ``tessera plan`` warns, and once applied the pool says
  ``InsufficientCapacity`` (resource, amount, pods) and cordons nothing, until a node with
  room joins: then it finishes by itself.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from devcluster import fleet, gpunode, identity
from devcluster.controlplane import ControlPlane, find_binaries
from devcluster.scheduling import Scheduling, find_kwok
from tessera.adapters.kube import Kube, Obj, path_of

from .capacity_support import (
    MIG_1G,
    TIER,
    Availability,
    all_running,
    kwok_node,
    pdb,
    pods_of,
    serving,
    until,
)
from .conftest import ROOT, Kubectl, OperatorProcess, service_account_kubeconfig
from .faults import LAYOUT_A, LAYOUT_B, NPG, assert_released, events, npg, pool_spec, wait_ready
from .helpers import condition, custom, eventually, namespace
from .rollout_ledger import Ledger

# One H100 per node: layout A gives 2 x 1g.10gb, layout B 7.
GPU = {"nvidia.com/gpu": 1}


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with ControlPlane(find_binaries(), scheduling=Scheduling(find_kwok())) as plane:
        kubectl = Kubectl(plane)
        kubectl.ok("apply", "--server-side", "-k", str(ROOT / "crds"))
        kubectl.ok("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        kubectl.ok("create", "namespace", identity.OPERATOR.namespace)
        kubectl.ok("apply", "-f", str(ROOT / "config" / "agent" / "namespace.yaml"))
        kubectl.ok("apply", "-k", str(ROOT / "config" / "rbac"))
        yield plane


@pytest.fixture(scope="module")
def kube(plane: ControlPlane) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(str(plane.kubeconfig))
    namespace(client, "gpu-operator")
    agents = gpunode.GpuNodeAgents(client, reconfigure_seconds=0.3).start()
    yield client
    agents.stop()
    client.close()


@pytest.fixture(scope="module")
def tessera(
    plane: ControlPlane, kube: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    folder = tmp_path_factory.mktemp("capacity")
    token = service_account_kubeconfig(plane, folder / "tessera.kubeconfig")
    proc = OperatorProcess(plane, folder / "operator.log", kubeconfig=token).start()
    yield proc
    proc.stop()
    proc.assert_clean_log()


def pool_on_layout_a(plane: ControlPlane, kube: Kube, pool: str, nodes: int) -> list[str]:
    """``nodes`` one-GPU nodes labelled tier ``pool``, converged to layout A."""
    specs = [replace(s, labels={TIER: pool}) for s in fleet.pool(pool, "H100-80GB", nodes, 1)]
    names = [kwok_node(plane, kube, s, GPU) for s in specs]
    kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
    wait_ready(kube, pool, 180, f"{pool} on layout A")
    return names


def deploy(
    plane: ControlPlane, kube: Kube, tier: str, ns: str, app: str, replicas: int
) -> list[Obj]:
    """``replicas`` of ``app`` on the ``tier`` nodes, under a PDB that lets one go at a time."""
    namespace(kube, ns)
    kube.create(path_of("apps/v1", "deployments", namespace=ns), serving(app, replicas, tier))
    kube.create(path_of("policy/v1", "poddisruptionbudgets", namespace=ns), pdb(app, replicas - 1))
    pods: list[Obj] = until(
        plane, lambda: all_running(kube, ns, app, replicas), f"{app}: {replicas} replicas Running"
    )
    budget = path_of("policy/v1", "poddisruptionbudgets", app, ns)
    until(
        plane, lambda: (kube.get(budget).get("status") or {}).get("disruptionsAllowed") == 1, "PDB"
    )
    return pods


def test_a_mig_change_moves_replicas_within_the_budget_and_every_one_comes_back(
    plane: ControlPlane, kube: Kube, tessera: OperatorProcess
) -> None:
    pool, ns, app = "roomy", "roomy-serving", "llm"
    pool_on_layout_a(plane, kube, pool, 3)  # 6 x 1g.10gb
    before = deploy(plane, kube, pool, ns, app, 3)  # 3 used, 3 free; PDB minAvailable 2
    with Ledger(kube, pool, ns) as ledger, Availability(kube, ns, app) as seen:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_B})
        wait_ready(kube, pool, 300, f"{pool} on layout B")
        after = until(plane, lambda: all_running(kube, ns, app, 3), "every replica back")
    assert ledger.worst == 1, f"{ledger.worst} nodes held at once, maxUnavailable is 1"
    assert seen.lowest is not None and seen.lowest >= 2, f"healthy replicas fell to {seen.lowest}"
    assert {p["metadata"]["uid"] for p in before} <= set(ledger.evicted)  # every node drained
    assert not {p["metadata"]["uid"] for p in after} & set(ledger.evicted)
    assert_released(kube, pool)
    assert not events(kube, pool, "InsufficientCapacity")  # room all along: never held back
    for node in kube.list("/api/v1/nodes", label_selector=f"tessera.io/pool={pool}"):
        assert node["status"]["allocatable"][MIG_1G] == "7", node["metadata"]["name"]


@pytest.fixture(scope="module")
def packed(plane: ControlPlane, kube: Kube, tessera: OperatorProcess) -> tuple[str, str, str]:
    """A pool on layout A whose every 1g.10gb a Deployment uses: no room anywhere."""
    pool, ns, app = "packed", "packed-serving", "chat"
    pool_on_layout_a(plane, kube, pool, 3)
    deploy(plane, kube, pool, ns, app, 6)
    return pool, ns, app


def first_nodes_pods(kube: Kube, ns: str, app: str, node: str) -> list[str]:
    return sorted(
        f"{ns}/{p['metadata']['name']}"
        for p in pods_of(kube, ns, app)
        if p["spec"].get("nodeName") == node
    )


def test_tessera_plan_warns_that_the_pods_would_have_nowhere_to_run(
    plane: ControlPlane, kube: Kube, packed: tuple[str, str, str], tmp_path: Path
) -> None:
    pool, ns, app = packed
    manifest = tmp_path / "b.yaml"
    manifest.write_text(yaml.safe_dump(custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_B))))
    run = [sys.executable, "-m", "tessera.cli.main", "plan", "-f", str(manifest)]
    out = subprocess.run(
        [*run, f"--kubeconfig={plane.kubeconfig}"], capture_output=True, text=True, timeout=120
    )
    pods = ", ".join(first_nodes_pods(kube, ns, app, f"{pool}-0"))
    line = (
        f"! InsufficientCapacity: 2 pod(s) would have nowhere to run: {MIG_1G} short by 2 ({pods})"
    )
    assert line in out.stdout, out.stdout + out.stderr
    assert out.returncode == 2, out.stderr  # a warning on the pace: the manifest still changes


def test_a_full_cluster_holds_the_next_node_until_room_appears_then_the_rollout_finishes(
    plane: ControlPlane, kube: Kube, packed: tuple[str, str, str]
) -> None:
    pool, ns, app = packed
    pods = ", ".join(first_nodes_pods(kube, ns, app, f"{pool}-0"))
    want = f"2 pod(s) would have nowhere to run: {MIG_1G} short by 2 ({pods})"
    with Ledger(kube, pool, ns) as ledger, Availability(kube, ns, app) as seen:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_B})

        def starved() -> Obj | None:
            obj = npg(kube, pool) or {}
            cond = condition(obj, "Reconciling") or {}
            fresh = (obj.get("status") or {}).get("observedGeneration") == obj["metadata"][
                "generation"
            ]
            return cond if fresh and cond.get("reason") == "InsufficientCapacity" else None

        cond = until(plane, starved, f"{pool} Reconciling/InsufficientCapacity")
        assert cond["status"] == "True" and cond["message"].startswith(want), cond
        warning = eventually(lambda: events(kube, pool, "InsufficientCapacity"), 30, "the Event")
        assert warning[0]["type"] == "Warning" and want in warning[0]["message"]
        assert ledger.worst == 0 and not ledger.evicted  # nothing cordoned, nothing evicted

        # outside the pool, in the team's tier
        spare = fleet.NodeSpec("packed-spare", "H100-80GB", 1, labels={TIER: pool})
        kwok_node(plane, kube, spare, {MIG_1G: 2}, gfd=False)
        wait_ready(kube, pool, 300, f"{pool} on layout B once room appeared")
        until(plane, lambda: all_running(kube, ns, app, 6), "every replica back")
    assert ledger.worst == 1 and ledger.evicted
    assert seen.lowest is not None and seen.lowest >= 5, f"healthy replicas fell to {seen.lowest}"
    assert_released(kube, pool)
    assert len(events(kube, pool, "InsufficientCapacity")) == 1  # once per change, not per pass
