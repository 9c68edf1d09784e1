"""Issue 18: vGPU pools rolled out node by node, on the real control plane.

A platform engineer runs KubeVirt VMs on vm-vgpu nodes of two A100 80GB PCIe GPUs each; the
simulated NVIDIA vGPU Device Manager and sandbox device plugin (``devcluster.vgpunode``, its own
board table) play the nodes. GPU 0 of every node holds the VMs' four A100D-20C; a NodePoolGeometry
re-cuts GPU 1. An outside ``Ledger`` watches the pool's Nodes and the VMs' pods throughout:

* the change rolls one node at a time (never more than ``maxUnavailable`` held), each node
  cordoned, its VMs evicted through the Eviction API (KubeVirt's live migration) and gone before
  the config label changes, the device manager's ``success`` and the sandbox device plugin's new
  ``nvidia.com/NVIDIA_<type>`` verified, the node uncordoned; the VMs' PDB is never violated and
  every evicted VM runs again;
* an apply the device manager fails (after deleting the GPU's vGPUs, as the real one does) is
  held cordoned under ``onFailure: Hold`` — until the engineer reverts the pool — and rolled
  back to the node's last good config under ``onFailure: Rollback``;
* a VM that cannot be evicted (its eviction refused) blocks its node, the pool naming it,
  with nothing applied under it; once it may go, the rollout finishes.
"""

from __future__ import annotations

from typing import Any

import pytest

from builders import PdbWrapper
from devcluster import vgpufleet, vgpunode
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from . import story_support as story
from .conftest import OperatorProcess
from .faults import NPG, assert_released, node_of, npg, wait_ready
from .helpers import app_pods, condition, eventually, wait_running
from .rollout_ledger import Ledger
from .vgpu_support import (
    VM_TYPE,
    advertised,
    config_label,
    create_pool,
    devices,
    layout,
    state_label,
    vgpu_agents,
    vgpu_configs,
    vm_nodes,
    vms,
)

__all__ = ["vgpu_agents"]  # fixture: the simulated vGPU stack
pytestmark = pytest.mark.integration
HALVES, EIGHTHS = {"A100D-40C": 2}, {"A100D-10C": 8}
OLD = [{VM_TYPE: 4}, HALVES]  # each node's vGPUs per GPU before the change
NEW = [{VM_TYPE: 4}, EIGHTHS]


def resources(per_gpu: list[dict[str, int]]) -> dict[str, str]:
    out: dict[str, int] = {}
    for held in per_gpu:
        for name, count in held.items():
            out[vgpufleet.resource(name)] = out.get(vgpufleet.resource(name), 0) + count
    return {k: str(v) for k, v in out.items()}


def stalled(kube: Kube, pool: str, reason: str) -> dict[str, Any] | None:
    obj = npg(kube, pool)
    cond = condition(obj, "Stalled")
    fresh = obj and obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
    return (
        cond if fresh and cond and cond["status"] == "True" and cond["reason"] == reason else None
    )


def budget(kube: Kube, ns: str, app: str, min_available: int) -> None:
    pdb = PdbWrapper(app).match(app=app).min_available(min_available).obj()
    kube.create(path_of("policy/v1", "poddisruptionbudgets", namespace=ns), pdb)


def test_a_type_change_rolls_node_by_node_while_the_vms_migrate(
    kube: Kube, operator: OperatorProcess, vgpu_agents: None
) -> None:
    pool, ns = "vgpu-roll", "vgpu-roll-vms"
    names = create_pool(kube, pool, 2, layout(HALVES), maxUnavailable=1)
    wait_ready(kube, pool, 180, "the vGPU pool's first layout")
    first = {name: config_label(kube, name) for name in names}
    for name in names:
        assert devices(kube, name) == OLD and advertised(kube, name) == resources(OLD), name
        assert state_label(kube, name) == "success" and first[name].startswith("tessera-")
    before = vms(kube, ns, "vm", pool, 3)
    budget(kube, ns, "vm", 2)  # at most one VM migrating at a time
    story.counted(kube, ns, "vm", 3)

    with Ledger(kube, pool, ns, budgets={"vm": 2}) as ledger:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": layout(EIGHTHS)})
        wait_ready(kube, pool, 300, "GPU 1 re-cut on every node")
        after = wait_running(kube, ns, "vm", 3, 120)
    assert 0 < ledger.worst <= 1, ledger.worst
    assert not ledger.below_budget, ledger.below_budget
    story.assert_replaced(ledger.evicted, before, after)  # every VM migrated, Running again
    assert_released(kube, pool)
    for name in names:
        assert devices(kube, name) == NEW and advertised(kube, name) == resources(NEW), name
        assert state_label(kube, name) == "success"
        assert config_label(kube, name) not in ("", first[name]), name
    configs = vgpu_configs(kube)
    (entries,) = {str(configs[config_label(kube, n)]) for n in names}  # one config, both nodes
    assert "A100D-10C" in entries and "A100D-40C" not in entries, entries
    obj = npg(kube, pool)
    assert obj is not None and obj["status"]["nodes"]["updated"] == 2, obj["status"]


@pytest.mark.parametrize("on_failure", ["Hold", "Rollback"])
def test_a_failed_apply_is_held_or_rolled_back(
    kube: Kube, operator: OperatorProcess, vgpu_agents: None, on_failure: str
) -> None:
    pool = f"vgpu-fail-{on_failure.lower()}"
    ns = f"{pool}-vms"
    names = create_pool(kube, pool, 2, layout(HALVES), maxUnavailable=1, onFailure=on_failure)
    wait_ready(kube, pool, 180, "the vGPU pool's first layout")
    broken = names[0]
    good = config_label(kube, broken)
    # Hold: every apply on the node fails. Rollback: every config but its last good one fails.
    fault = "true" if on_failure == "Hold" else f"except:{good}"
    kube.patch(
        path_of("v1", "nodes", broken), {"metadata": {"annotations": {vgpunode.FAIL: fault}}}
    )
    vms(kube, ns, "vm", pool, 2)

    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": layout(EIGHTHS)})
        cond = eventually(lambda: stalled(kube, pool, "NodeFailed"), 180, f"{broken} Failed")
        assert broken in cond["message"], cond
        if on_failure == "Hold":
            node = node_of(kube, broken)
            assert node["spec"].get("unschedulable") is True  # held out of scheduling
            assert node["metadata"]["annotations"][c.NODE_PHASE_ANNOTATION] == "Failed"
            assert state_label(kube, broken) == "failed"
            error = node["metadata"]["annotations"][vgpunode.ERROR]
            assert "injected fault" in error, error
            assert devices(kube, broken) == [{VM_TYPE: 4}, {}]  # GPU 1's vGPUs were deleted
            assert broken not in vm_nodes(kube, ns, "vm")  # no VM lands on a held node
            # The engineer reverts the pool in Git; the node goes back to its last good config.
            kube.patch(
                path_of("v1", "nodes", broken), {"metadata": {"annotations": {vgpunode.FAIL: None}}}
            )
            kube.patch(f"{NPG}/{pool}", {"spec": layout(HALVES)})
            wait_ready(kube, pool, 240, f"{pool} Ready after the revert")
        else:

            def rolled_back() -> bool:
                node = node_of(kube, broken)
                return (
                    config_label(kube, broken) == good
                    and state_label(kube, broken) == "success"
                    and not node["spec"].get("unschedulable")
                )

            eventually(rolled_back, 180, f"{broken} rolled back to {good}, uncordoned")
            scraped = operator.scrape()
            assert f'tessera_rollbacks_total{{pool="{pool}"}} 1.0' in scraped
        wait_running(kube, ns, "vm", 2, 120)
    assert ledger.worst <= 1, ledger.worst
    assert devices(kube, broken) == OLD  # the last good config, recreated
    eventually(
        lambda: advertised(kube, broken) == resources(OLD), 30, f"{broken} advertising again"
    )
    if on_failure == "Hold":
        assert_released(kube, pool)


def test_a_vm_that_cannot_be_evicted_blocks_its_node_naming_it(
    kube: Kube, operator: OperatorProcess, vgpu_agents: None
) -> None:
    pool, ns = "vgpu-pinned", "vgpu-pinned-vms"
    names = create_pool(kube, pool, 2, layout(HALVES), maxUnavailable=1, drain={"timeout": "3s"})
    wait_ready(kube, pool, 180, "the vGPU pool's first layout")
    (pinned,) = vms(kube, ns, "pinned", pool, 1)
    pdb = vgpufleet.not_migratable("pinned")  # KubeVirt refuses its eviction: not migratable
    kube.create(path_of("policy/v1", "poddisruptionbudgets", namespace=ns), pdb)
    node = pinned["spec"]["nodeName"]
    applied = config_label(kube, node)

    with Ledger(kube, pool, ns) as ledger:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": layout(EIGHTHS)})
        cond = eventually(lambda: stalled(kube, pool, "DrainBlocked"), 180, "DrainBlocked")
        pod_name = pinned["metadata"]["name"]
        assert f"{ns}/{pdb['metadata']['name']}" in cond["message"], cond
        assert pod_name in cond["message"] or node in cond["message"], cond
        (live,) = app_pods(kube, ns, "pinned", live=False)
        assert live["metadata"]["uid"] == pinned["metadata"]["uid"]  # refused, never deleted
        assert not live["metadata"].get("deletionTimestamp")
        assert config_label(kube, node) == applied and devices(kube, node) == OLD  # untouched
        # The VM is made migratable (its PDB goes): KubeVirt migrates it, the rollout finishes.
        kube.delete(path_of("policy/v1", "poddisruptionbudgets", pdb["metadata"]["name"], ns))
        wait_ready(kube, pool, 240, f"{pool} Ready once the VM may migrate")
        (again,) = wait_running(kube, ns, "pinned", 1, 120)
    assert ledger.worst <= 1, ledger.worst
    assert pinned["metadata"]["uid"] in ledger.evicted  # evicted once it was allowed to go
    assert again["metadata"]["uid"] not in ledger.evicted  # the migrated VM, Running
    assert_released(kube, pool)
    for name in names:
        assert devices(kube, name) == NEW, name
