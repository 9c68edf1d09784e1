"""DeviceClass generation for DRA pools: 1,000 pools and their SharingPolicies, desired and diffed.

Every NodePoolGeometry and SharingPolicy pass computes the whole desired set of Tessera's
DeviceClasses (classes are shared by pools, ``controllers.dra.classes``), so that set must be
cheap at the largest cluster: 1,000 DRA pools of mixed geometries (whole GPUs, MIG layouts
by index, ``+me`` profiles), one sharing policy on each (MPS, time-slicing, exclusive), every
layout validated on its nodes' GPU model, every config checked with the driver's rules and every selector with Tessera's own check. The floor
measured side by side is rendering the same classes' manifests with no validation, no
self-check and no merge of declarers. Then the set is diffed against the cluster as the API
server would hold it once converged: a resync must find 0 writes. Target: < 1 s.
"""

from __future__ import annotations

import random
import time
from typing import Any

from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain import dra
from tessera.domain.dra import naming
from tessera.domain.geometry import capacity, catalog

POOLS = 1_000
SEED = 11
MODEL = "NVIDIA-H100-80GB-HBM3"  # every pool's nodes: layouts validated against it
PROFILES = ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")


def cluster(seed: int = SEED) -> tuple[dict[str, dra.PoolInput], dict[str, SharingPolicySpec]]:
    rng = random.Random(seed)
    pools: dict[str, dra.PoolInput] = {}
    policies: dict[str, SharingPolicySpec] = {}
    gates = {"featureGates": {"timeSlicingSettings": True, "mpsSupport": True}}
    for i in range(POOLS):
        spec: dict[str, Any] = {"nodeSelector": {}, "allocation": "DRA", "dra": gates}
        if rng.random() < 0.7:
            chosen = rng.sample(PROFILES, rng.randint(1, 3))
            devices = "all" if rng.random() < 0.6 else f"0-{rng.randrange(1, 7)}"
            spec["mig"] = {"layouts": [{"devices": devices, "profiles": dict.fromkeys(chosen, 1)}]}
        parsed = NodePoolGeometrySpec.model_validate(spec)
        pools[f"pool-{i}"] = dra.PoolInput(parsed, 8, ((MODEL, 8),))
        backend = rng.choice(("Exclusive", "TimeSlicing", "MPS"))
        policy: dict[str, Any] = {"poolRef": {"name": f"pool-{i}"}, "backend": backend}
        if backend == "TimeSlicing":
            policy["dra"] = {"timeSlicing": {"interval": rng.choice(("Default", "Long"))}}
        if backend == "MPS":
            policy["dra"] = {"mps": {"defaultActiveThreadPercentage": rng.randrange(10, 100)}}
        policies[f"share-{i}"] = SharingPolicySpec.model_validate(policy)
    return pools, policies


def floor(pools: dict[str, dra.PoolInput], policies: dict[str, SharingPolicySpec]) -> int:
    """The same class manifests, rendered with nothing checked nor merged."""
    made = 0
    for name, pool in pools.items():
        for selects in dra.provides(pool.spec, pool.gpus):
            dra.DesiredClass(naming.geometry_class(selects), selects, (name,)).manifest()
            made += 1
    for name, spec in policies.items():
        assert spec.pool_ref is not None
        pool = pools[spec.pool_ref.name]
        for selects in dra.provides(pool.spec, pool.gpus):
            cls = dra.DesiredClass(naming.sharing_class(name, selects), selects, (name,))
            cls.manifest()
            made += 1
    return made


def stored(desired: dra.DesiredClasses) -> list[dict[str, Any]]:
    """The cluster once converged: each class as the API server returns it."""
    out = []
    for i, cls in enumerate(desired.classes.values()):
        obj = cls.manifest()
        obj["metadata"]["resourceVersion"] = str(1000 + i)
        out.append(obj)
    return out


def main() -> None:
    pools, policies = cluster()
    catalog.models()  # loaded once per process (the operator's start), not per pass
    capacity.clear_cache()  # a cold start: no layout validated yet
    start = time.perf_counter()
    desired = dra.desired_classes(pools, policies)
    generate_s = time.perf_counter() - start
    start = time.perf_counter()
    rendered = floor(pools, policies)
    floor_s = time.perf_counter() - start
    observed = stored(desired)
    start = time.perf_counter()
    changes = dra.diff(desired, observed)
    diff_s = time.perf_counter() - start
    refused = len(desired.problems)
    print(
        f"{POOLS:,} DRA pools, {len(policies):,} policies: {len(desired.classes):,} classes "
        f"({rendered:,} declarations), {refused} refused"
    )
    print(f"{'step':<40}{'seconds':>10}")
    print(f"{'desired_classes (checked, merged)':<40}{generate_s:>10.3f}")
    print(f"{'floor: render manifests, nothing checked':<40}{floor_s:>10.3f}")
    print(f"{'diff against the converged cluster':<40}{diff_s:>10.3f}")
    verdict = "met" if generate_s + diff_s < 1.0 else "MISSED"
    print(
        f"ratio to the floor: {generate_s / floor_s:.2f}x; writes on a converged resync: "
        f"{changes.writes} (target 0: {'met' if changes.writes == 0 else 'MISSED'}); "
        f"target 1,000 pools in < 1 s: {verdict} ({generate_s + diff_s:.3f} s)"
    )


if __name__ == "__main__":
    main()
