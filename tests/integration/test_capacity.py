"""Issue 14, item 4: availability-aware rollouts, on a cluster that really schedules.

kube-scheduler places every serving replica (Deployments, no nodeName), KWOK runs them, the
operator runs under its ServiceAccount's token (config/rbac) and the simulated MIG manager turns
layouts into MIG resources. An outside watcher checks over the whole run: never more than
``maxUnavailable`` nodes of the pool held by Tessera, never fewer healthy replicas than the PDB's
``minAvailable``, every evicted replica Running again at the end, nothing of Tessera's left on a
node.

* a MIG change rolls through a pool whose Deployment has room to move;
* with the rest of the team's nodes full, ``tessera plan`` warns, and once applied the pool says
  ``InsufficientCapacity`` (resource, amount, pods) and cordons nothing, until a node with room
  joins: then it finishes by itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builders import LAYOUT_A, LAYOUT_B, custom
from devcluster.controlplane import ControlPlane
from tessera.adapters.kube import Kube, Obj

from .capacity_support import MIG_1G, TIER, Availability, tier_pool, tier_spare
from .conftest import OperatorProcess
from .faults import NPG, agents, assert_released, events, npg, pool_nodes, pool_spec, wait_ready
from .helpers import app_pods, condition, eventually, namespace, serve, wait_running
from .rollout_ledger import Ledger

__all__ = ["agents"]  # the module-scoped fixture (simulated GPU agents)
# One H100 per node: layout A gives it 2 x 1g.10gb, layout B 7.


def pool_on_layout_a(kube: Kube, pool: str, nodes: int) -> list[str]:
    names = tier_pool(kube, pool, nodes)
    kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
    wait_ready(kube, pool, 180, f"{pool} on layout A")
    return names


def deploy(kube: Kube, tier: str, ns: str, app: str, replicas: int) -> list[Obj]:
    """``replicas`` of ``app`` on the ``tier`` nodes, under a PDB letting one go at a time."""
    namespace(kube, ns)
    pods = serve(
        kube,
        ns,
        app,
        budget=replicas - 1,
        resource=MIG_1G,
        replicas=replicas,
        node_selector={TIER: tier},
    )
    budget = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{app}"
    eventually(
        lambda: (kube.get(budget).get("status") or {}).get("disruptionsAllowed") == 1,
        60,
        f"PDB {ns}/{app} allowing one disruption",
    )
    return pods


def test_a_mig_change_moves_replicas_within_the_budget_and_every_one_comes_back(
    kube: Kube, operator: OperatorProcess, agents: None
) -> None:
    pool, ns, app = "roomy", "roomy-serving", "llm"
    pool_on_layout_a(kube, pool, 3)  # 6 x 1g.10gb
    before = deploy(kube, pool, ns, app, 3)  # 3 used, 3 free; PDB minAvailable 2
    with Ledger(kube, pool, ns) as ledger, Availability(kube, ns, app) as seen:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_B})
        wait_ready(kube, pool, 300, f"{pool} on layout B")
        after = wait_running(kube, ns, app, 3, timeout=120)
    assert ledger.worst == 1, f"{ledger.worst} nodes held at once, maxUnavailable is 1"
    assert seen.lowest is not None and seen.lowest >= 2, f"healthy replicas fell to {seen.lowest}"
    assert {p["metadata"]["uid"] for p in before} <= set(ledger.evicted)  # every node drained
    assert not {p["metadata"]["uid"] for p in after} & set(ledger.evicted)
    assert_released(kube, pool)
    assert not events(kube, pool, "InsufficientCapacity")  # room all along: never held back
    for node in pool_nodes(kube, pool):
        assert node["status"]["allocatable"][MIG_1G] == "7", node["metadata"]["name"]


@pytest.fixture(scope="module")
def packed(kube: Kube, operator: OperatorProcess, agents: None) -> tuple[str, str, str]:
    """A pool on layout A whose every 1g.10gb the team's Deployment uses: no room in its tier."""
    pool, ns, app = "packed", "packed-serving", "chat"
    pool_on_layout_a(kube, pool, 3)
    deploy(kube, pool, ns, app, 6)
    return pool, ns, app


def first_nodes_pods(kube: Kube, ns: str, app: str, node: str) -> str:
    """The pods the first node's drain would evict, as the message names them."""
    pods = app_pods(kube, ns, app)
    return ", ".join(
        sorted(f"{ns}/{p['metadata']['name']}" for p in pods if p["spec"]["nodeName"] == node)
    )


def test_tessera_plan_warns_that_the_pods_would_have_nowhere_to_run(
    control_plane: ControlPlane, kube: Kube, packed: tuple[str, str, str], tmp_path: Path
) -> None:
    pool, ns, app = packed
    manifest = tmp_path / "b.yaml"
    manifest.write_text(yaml.safe_dump(custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_B))))
    run = [sys.executable, "-m", "tessera.cli.main", "plan", "-f", str(manifest)]
    out = subprocess.run(
        [*run, f"--kubeconfig={control_plane.kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    pods = first_nodes_pods(kube, ns, app, f"{pool}-0")
    line = (
        f"! InsufficientCapacity: 2 pod(s) would have nowhere to run: {MIG_1G} short by 2 ({pods})"
    )
    assert line in out.stdout, out.stdout + out.stderr
    assert out.returncode == 2, out.stderr  # a warning on the pace: the manifest still changes


def test_a_full_tier_holds_the_next_node_until_room_appears_then_the_rollout_finishes(
    kube: Kube, packed: tuple[str, str, str]
) -> None:
    pool, ns, app = packed
    pods = first_nodes_pods(kube, ns, app, f"{pool}-0")
    want = f"2 pod(s) would have nowhere to run: {MIG_1G} short by 2 ({pods})"
    with Ledger(kube, pool, ns) as ledger, Availability(kube, ns, app) as seen:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_B})

        def starved() -> dict[str, str] | None:
            obj = npg(kube, pool) or {}
            cond = condition(obj, "Reconciling") or {}
            status = obj.get("status") or {}
            fresh = status.get("observedGeneration") == obj["metadata"]["generation"]
            return cond if fresh and cond.get("reason") == "InsufficientCapacity" else None

        cond = eventually(starved, 120, f"{pool} Reconciling/InsufficientCapacity")
        assert cond["status"] == "True" and cond["message"].startswith(want), cond
        warning = eventually(lambda: events(kube, pool, "InsufficientCapacity"), 30, "the Event")
        assert warning[0]["type"] == "Warning" and want in warning[0]["message"]
        assert ledger.worst == 0 and not ledger.evicted  # nothing cordoned, nothing evicted

        tier_spare(kube, "packed-spare", pool, {MIG_1G: 2})  # a node joins the team's tier
        wait_ready(kube, pool, 300, f"{pool} on layout B once room appeared")
        wait_running(kube, ns, app, 6, timeout=120)
    assert ledger.worst == 1 and ledger.evicted
    assert seen.lowest is not None and seen.lowest >= 5, f"healthy replicas fell to {seen.lowest}"
    assert_released(kube, pool)
    assert len(events(kube, pool, "InsufficientCapacity")) == 1  # once per change, not per pass
