"""Issue 28, a DRA pool GPU by GPU, on the real control plane.

One H100 node of four GPUs in a pool with ``allocation: DRA`` runs the simulated MIG manager
and the simulated NVIDIA DRA driver; a Deployment's four replicas each hold a whole GPU
through a ResourceClaim that kube-scheduler allocates, under a PDB that lets two go. The
platform engineer repartitions GPUs 0-1; an outside ``Ledger`` watches Nodes and Pods:

* only the replicas whose claims hold GPU 0 or 1 are evicted, once each, through the
  Eviction API; the PDB holds throughout;
* the replicas on GPUs 2-3 keep their uids and are never evicted;
* the pool ends Ready, the slice lists the new devices, nothing of Tessera's is left on the
  node. No agent is involved: who holds which GPU comes from the claims.

Before the change, ``tessera plan`` (live, and from a snapshot) names the same two replicas as
moving and the other two as staying: it reads the claims as the operator does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import DeploymentWrapper, PdbWrapper, custom
from devcluster import dradriver, fleet
from tessera.adapters.kube import Kube, path_of

from .conftest import OperatorProcess
from .dra_support import NPG, DraObjects, dra_objects, driver, whole_gpu_pool
from .faults import agents, assert_released, pool_spec, wait_ready
from .helpers import eventually, namespace, wait_running
from .rollout_ledger import Ledger
from .test_plan import plan_pool_live_and_offline

__all__ = ["agents", "dra_objects", "driver"]
pytestmark = pytest.mark.integration
RESOURCE = "resource.k8s.io/v1"
SPLIT = {
    "mig": {
        "layouts": [
            {"devices": "0-1", "profiles": {"1g.10gb": 7}},
            {"devices": "2-3", "profiles": {}},
        ]
    }
}
REPLICAS, MIN_AVAILABLE = 4, 2


def gpus_of(kube: Kube, ns: str, node: str) -> dict[str, int] | None:
    """Pod uid → the GPU its claim holds on ``node`` (the sim names whole GPUs ``gpu-<i>``),
    once every replica's claim is allocated and reserved."""
    out = {}
    for claim in kube.list(path_of(RESOURCE, "resourceclaims", namespace=ns)):
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        for r in results:
            for consumer in status.get("reservedFor") or []:
                if r["pool"] == node:
                    out[consumer["uid"]] = int(r["device"].removeprefix("gpu-"))
    return out if len(out) == REPLICAS else None


def plan_says_what_moves(
    kubeconfig: Path, tmp_path: Path, pool: str, node: str, moves: set[str], stays: set[str]
) -> None:
    """``tessera plan`` of the split, live and from a snapshot: on ``node`` GPUs 0-1 change,
    the pods ``moves`` leave and ``stays`` stay."""
    manifest = tmp_path / "split.yaml"
    spec = {**pool_spec(pool, SPLIT, maxUnavailable=1), "allocation": "DRA"}
    manifest.write_text(yaml.safe_dump(custom("NodePoolGeometry", pool, spec)))
    obj, text = plan_pool_live_and_offline(kubeconfig, manifest, pool, tmp_path)
    [change] = [ch for ch in obj["changes"] if ch["node"] == node]
    line = "GPUs 0-1 change (0-1: whole GPU -> 7x1g.10gb); 2 pods move, 2 stay"
    assert change["scope"] == line, text
    assert set(change["evicts"]) == moves and set(change["stays"]) == stays
    assert f"      {line}\n" in text


def test_a_dra_node_moves_only_the_claims_on_the_gpus_that_change(
    kube: Kube,
    operator: OperatorProcess,
    driver: dradriver.DraDriver,
    dra_objects: DraObjects,
    control_plane: Any,
    tmp_path: Path,
) -> None:
    pool, ns = "dra-gpus", "dra-gpus-ns"
    node = whole_gpu_pool(kube, dra_objects, pool)
    namespace(kube, ns)
    template = {
        "metadata": {"name": "serve"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.tessera.io"}}]
                }
            }
        },
    }
    kube.create(path_of(RESOURCE, "resourceclaimtemplates", namespace=ns), template)
    manifest = DeploymentWrapper("serve").replicas(REPLICAS).pool(pool).obj()
    pod = manifest["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "serve"}]
    pod["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    kube.create(path_of("apps/v1", "deployments", namespace=ns), manifest)
    kube.create(
        path_of("policy/v1", "poddisruptionbudgets", namespace=ns),
        PdbWrapper("serve").match(app="serve").min_available(MIN_AVAILABLE).obj(),
    )
    wait_running(kube, ns, "serve", REPLICAS, 90)
    held = eventually(lambda: gpus_of(kube, ns, node), 60, "every replica's GPU")
    assert sorted(held.values()) == [0, 1, 2, 3], held
    changing = {uid for uid, gpu in held.items() if gpu in (0, 1)}
    staying = set(held) - changing
    # Room for the replicas that move: an empty node joins the pool (it changes first, having
    # nothing to move, and keeps GPUs 2-3 whole for them).
    fleet.create_nodes(kube, [fleet.NodeSpec(f"{pool}-1", "H100-80GB", 4, pool=pool, dra=True)])
    wait_ready(kube, pool, 180, "the spare node at whole GPUs")
    names = {
        p["metadata"]["uid"]: f"{ns}/{p['metadata']['name']}"
        for p in kube.list(f"/api/v1/namespaces/{ns}/pods")
    }
    plan_says_what_moves(
        control_plane.kubeconfig,
        tmp_path,
        pool,
        node,
        {names[u] for u in changing},
        {names[u] for u in staying},
    )

    with Ledger(kube, pool, ns, budgets={"serve": MIN_AVAILABLE}) as ledger:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": SPLIT})
        wait_ready(kube, pool, 150, "GPUs 0-1 repartitioned on the DRA pool")
    assert set(ledger.evicted) == changing, "exactly the replicas on GPUs 0-1 were evicted"
    live = {p["metadata"]["uid"] for p in kube.list(f"/api/v1/namespaces/{ns}/pods")}
    assert staying <= live, "the replicas on GPUs 2-3 kept running, untouched"
    assert ledger.below_budget == [] and ledger.worst <= 1
    assert_released(kube, pool)
    found = kube.get(path_of(RESOURCE, "resourceslices", dradriver.slice_name(node)))
    kinds = sorted(
        d["attributes"].get("profile", d["attributes"]["type"])["string"]
        for d in found["spec"]["devices"]
    )
    assert kinds == ["1g.10gb"] * 14 + ["gpu"] * 2, kinds
