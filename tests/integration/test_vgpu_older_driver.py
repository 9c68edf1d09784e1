"""A vGPU pool on fresh nodes of an older vGPU driver, on the real control plane.

Older drivers name mdev types ``GRID <type>``, so the sandbox device plugin advertises
``nvidia.com/GRID_<type>`` (docs/facts/vgpu.md). A fresh node advertises nothing before its
first layout, so Tessera cannot tell which driver it runs: the pool's first layout must verify
under either name, not fail after ``verifyTimeout``. The simulated sandbox device plugin plays
the older driver (``sim.tessera.io/vgpu-mdev-prefix: GRID``).
"""

from __future__ import annotations

import pytest

from builders import custom
from devcluster import fleet, vgpufleet, vgpunode
from tessera.adapters.kube import Kube

from .conftest import OperatorProcess
from .faults import NPG, assert_released, npg, pool_spec, wait_ready
from .helpers import eventually
from .vgpu_support import BOARD, VM_TYPE, advertised, state_label, vgpu_agents

__all__ = ["vgpu_agents"]  # fixture: the simulated vGPU stack
pytestmark = pytest.mark.integration


def test_a_fresh_node_on_an_older_driver_verifies_its_first_layout(
    kube: Kube, operator: OperatorProcess, vgpu_agents: None
) -> None:
    pool = "vgpu-grid"
    manifests = [vgpufleet.node_manifest(s) for s in vgpufleet.pool(pool, BOARD, 2, gpus=2)]
    for manifest in manifests:
        manifest["metadata"]["annotations"][vgpunode.MDEV_PREFIX] = "GRID"
    names = fleet.create_from_manifests(kube, manifests)
    for name in names:
        assert not advertised(kube, name), name  # nothing to tell the driver by
    layout = {"vgpu": {"layouts": [{"types": {VM_TYPE: 4}}]}}
    spec = pool_spec(pool, layout, maxUnavailable=2)  # verifyTimeout 1m
    kube.create(NPG, custom("NodePoolGeometry", pool, spec))
    obj = wait_ready(kube, pool, 180, "the first layout verified under GRID_ names")
    for name in names:
        assert advertised(kube, name) == {vgpufleet.resource(VM_TYPE, "GRID"): "8"}, name
        assert state_label(kube, name) == "success", name
    assert obj["status"]["nodes"]["updated"] == 2, obj["status"]
    assert not [
        c
        for c in obj["status"].get("conditions", [])
        if c["type"] == "Stalled" and c["status"] == "True"
    ], obj["status"]
    kube.delete(f"{NPG}/{pool}")
    eventually(lambda: npg(kube, pool) is None, 60, f"{pool} deleted")
    assert_released(kube, pool)
