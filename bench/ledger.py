"""The capacity ledger (issue 30): 10,000 nodes, 200 tenants, one geometry change.

100 MIG pools of 100 one-GPU H100 nodes, every node at its pool's target (7g.80gb, 3g+2g+2x1g,
or 7 x 1g.10gb), and 200 TenantQuotas each promising a total of one or two MIG profiles. One
pool then changes 7g.80gb -> 7 x 1g.10gb and its nodes are mid-rollout (each counted at the lower
of old and new). Measured side by side in one run: the ledger recomputed from the raw Nodes
(``cluster.capacity.ledger``: pool membership, each node's target and whether it is there),
the tenants' capacity and ``Overcommitted`` recomputed from it, and the floor, summing the
nodes' allocatable (what Tessera compared quotas with before the ledger). Writes are the
TenantQuota statuses whose capacity or ``Overcommitted`` changed: only the tenants that name a
profile of the changed pool.
"""

from __future__ import annotations

import random
import time
from typing import Any

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.cluster import capacity, pools
from tessera.domain.geometry import capacity as mig
from tessera.domain.geometry import catalog
from tessera.domain.quota import reporting
from tessera.domain.quota.ledger import CapacityLedger
from tessera.domain.quota.quantities import accelerators

NODES, POOLS, TENANTS, SEED = 10_000, 100, 200, 5
PRODUCT = "NVIDIA-H100-80GB-HBM3"
LAYOUTS: tuple[dict[str, int], ...] = (
    {"7g.80gb": 1},
    {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
    {"1g.10gb": 7},
)


def spec(pool: str, profiles: dict[str, int]) -> NodePoolGeometrySpec:
    return NodePoolGeometrySpec.model_validate(
        {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}},
            "mig": {"layouts": [{"profiles": profiles}]},
        }
    )


def node(name: str, pool: str, runs: NodePoolGeometrySpec) -> dict[str, Any]:
    labels = {c.POOL_LABEL: pool, c.GPU_PRODUCT_LABEL: PRODUCT, c.GPU_COUNT_LABEL: "1"}
    target = pools.target_for(pool, runs, labels, {})
    labels |= {**target.desired.labels, c.MIG_CONFIG_STATE_LABEL: "success"}
    advertised = {r: str(n) for r, n in target.capacity.items()}
    return {
        "metadata": {"name": name, "labels": labels, "annotations": {}},
        "status": {"allocatable": {"cpu": "64", **advertised}},
    }


def cluster() -> tuple[list[dict[str, Any]], dict[str, NodePoolGeometrySpec]]:
    geometries = {f"pool-{p}": spec(f"pool-{p}", LAYOUTS[p % len(LAYOUTS)]) for p in range(POOLS)}
    per = NODES // POOLS
    nodes = [
        node(f"pool-{p}-{i}", f"pool-{p}", geometries[f"pool-{p}"])
        for p in range(POOLS)
        for i in range(per)
    ]
    return nodes, geometries


def commitments() -> dict[str, dict[str, int]]:
    rng = random.Random(SEED)
    names = sorted({mig.mig_resource(p) for layout in LAYOUTS for p in layout})
    return {
        f"tenant-{t:03}": {r: rng.randrange(10, 200) for r in rng.sample(names, rng.randint(1, 2))}
        for t in range(TENANTS)
    }


def statuses(
    ledger: CapacityLedger, promised: dict[str, dict[str, int]]
) -> dict[str, tuple[object, ...]]:
    """Per tenant, what its status says of capacity: the capacities and Overcommitted."""
    totals = ledger.totals()
    out = {}
    for tenant, mine in promised.items():
        condition = reporting.overcommitted(tenant, promised, totals, ledger)
        out[tenant] = (tuple((r, totals.get(r, 0)) for r in sorted(mine)), condition)
    return out


def floor(nodes: list[dict[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for n in nodes:
        for r, k in accelerators(n["status"]["allocatable"]).items():
            total[r] = total.get(r, 0) + k
    return total


def main() -> None:
    catalog.models()
    nodes, geometries = cluster()
    promised = commitments()
    before = statuses(capacity.ledger(nodes, geometries, {}), promised)
    geometries["pool-0"] = spec("pool-0", {"1g.10gb": 7})  # was 7g.80gb: every node changing
    mig.clear_cache()
    start = time.perf_counter()
    ledger = capacity.ledger(nodes, geometries, {})
    ledger_s = time.perf_counter() - start
    start = time.perf_counter()
    after = statuses(ledger, promised)
    tenants_s = time.perf_counter() - start
    start = time.perf_counter()
    floor(nodes)
    floor_s = time.perf_counter() - start
    writes = sum(before[t] != after[t] for t in promised)
    naming = sum(
        any(r in (mig.mig_resource("7g.80gb"), mig.mig_resource("1g.10gb")) for r in p)
        for p in promised.values()
    )
    print(
        f"{NODES:,} nodes in {POOLS} pools, {TENANTS} tenants; pool-0 changes 7g.80gb -> "
        f"7 x 1g.10gb ({len(ledger.changing.get('pool-0', ()))} nodes changing)"
    )
    print(f"{'step':<48}{'seconds':>10}")
    print(f"{'ledger from the raw nodes (membership, targets)':<48}{ledger_s:>10.3f}")
    print(f"{'tenants: capacity and Overcommitted':<48}{tenants_s:>10.3f}")
    print(f"{'floor: sum the nodes allocatable':<48}{floor_s:>10.3f}")
    print(
        f"ratio to the floor: {(ledger_s + tenants_s) / floor_s:.1f}x; status writes after the "
        f"change: {writes} of {TENANTS} tenants (the {naming} naming 7g.80gb or 1g.10gb at most)"
    )


if __name__ == "__main__":
    main()
