"""Issue 18: the VMs of a vGPU node leave by live migration, as on a real KubeVirt cluster.

KubeVirt answers the eviction of a migratable VM's virt-launcher pod with 429 and migrates the
VM; the source pod leaves afterwards (``devcluster.kubevirt_eviction``: a real admission
webhook on ``pods/eviction`` registered with the kube-apiserver, and the pod deleted once the
"migration" ends). Tessera must take that refusal as "not yet": keep waiting for the pod to
leave — no ``DrainBlocked``, nothing deleted by Tessera (``drain.force`` is refused on vGPU
pools) — and roll on once it has.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devcluster import kubevirt_eviction
from tessera.adapters.kube import Kube, Obj

from .conftest import OperatorProcess
from .faults import NPG, assert_released, ready, wait_ready
from .helpers import eventually, namespace, wait_running
from .rollout_ledger import Ledger
from .test_vgpu_rollout import EIGHTHS, HALVES, NEW, stalled
from .vgpu_support import create_pool, devices, layout, vgpu_agents, vms

__all__ = ["vgpu_agents"]  # fixture: the simulated vGPU stack
pytestmark = pytest.mark.integration


@pytest.fixture
def kubevirt(kube: Kube) -> Iterator[kubevirt_eviction.KubevirtEvacuation]:
    sim = kubevirt_eviction.KubevirtEvacuation(kube, migrate_seconds=3.0).start()
    try:
        yield sim
    finally:
        sim.stop()


def test_a_refused_eviction_is_a_live_migration_tessera_waits_through(
    kube: Kube,
    operator: OperatorProcess,
    vgpu_agents: None,
    kubevirt: kubevirt_eviction.KubevirtEvacuation,
) -> None:
    pool, ns = "vgpu-migrate", "vgpu-migrate-vms"
    names = create_pool(kube, pool, 2, layout(HALVES), maxUnavailable=1)
    wait_ready(kube, pool, 180, "the vGPU pool's first layout")
    namespace(kube, ns, {kubevirt_eviction.NAMESPACE_LABEL: "true"})
    before = vms(kube, ns, "vm", pool, 2)

    def ready_never_blocked() -> Obj | None:
        assert stalled(kube, pool, "DrainBlocked") is None, "a live migration is not a block"
        return ready(kube, pool)

    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": layout(EIGHTHS)})
        eventually(ready_never_blocked, 300, f"{pool} Ready, each VM migrated")
        after = wait_running(kube, ns, "vm", 2, 120)
    assert ledger.worst <= 1, ledger.worst
    for pod in before:  # each VM's eviction refused (429) first, its pod gone afterwards
        ref = f"{ns}/{pod['metadata']['name']}"
        assert kubevirt.refused.get(ref, 0) >= 1, (ref, kubevirt.refused)
        assert ref in kubevirt.migrated, (ref, kubevirt.migrated)  # live until migrated
        assert pod["metadata"]["uid"] in ledger.evicted, ref
    assert {p["metadata"]["uid"] for p in after}.isdisjoint(ledger.evicted)
    assert_released(kube, pool)
    for name in names:
        assert devices(kube, name) == NEW, name
