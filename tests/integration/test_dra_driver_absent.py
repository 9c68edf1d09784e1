"""Issue 16, bad input: a DRA pool on nodes without the driver waits for it, and never drains.

A node's devices are verified from the ResourceSlices NVIDIA's DRA driver publishes, so a node
whose driver is absent (not installed, uninstalled, its plugin crashed, an upgrade, the kubelet
wiping the slices of a plugin that unregistered) cannot be verified: the pool is
``Reconciling``, reason ``WaitingForDriver``, naming the nodes, and Tessera writes nothing to
them — no cordon, no taint, no layout label — until the driver publishes. An outside ``Ledger``
watches the pool's Nodes throughout. The simulated driver (``devcluster.dradriver``) runs its
kubelet plugin on nodes labelled ``nvidia.com/gpu.deploy.dra-driver=true`` and, like the
kubelet, deletes a node's slice once its plugin pod is gone and has not come back
(``wipe_after``, short here).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from builders import custom
from devcluster import dradriver, fleet
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .faults import NPG, agents, assert_released, events, npg, wait_ready
from .helpers import condition, eventually
from .rollout_ledger import Ledger
from .test_dra_rollout import ONE_G, dra_spec, published

__all__ = ["agents"]  # the module-scoped fixture (simulated GPU agents)
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def driver(kube: Kube, agents: None) -> Iterator[dradriver.DraDriver]:
    sim = dradriver.DraDriver(kube, wipe_after=3.0).start()
    try:
        yield sim
    finally:
        sim.stop()


def reconciling(kube: Kube, pool: str) -> tuple[str, str]:
    found = condition(npg(kube, pool), "Reconciling") or {}
    return str(found.get("reason", "")), str(found.get("message", ""))


def label_driver(kube: Kube, node: str, value: str | None) -> None:
    kube.patch(
        path_of("v1", "nodes", node), {"metadata": {"labels": {fleet.DRA_NODE_LABEL: value}}}
    )


def test_a_pool_waits_for_its_driver_and_rolls_once_it_publishes(
    kube: Kube, operator: OperatorProcess, driver: dradriver.DraDriver
) -> None:
    pool = "dra-nodriver"
    off = {fleet.DRA_NODE_LABEL: "false"}
    specs = [
        fleet.NodeSpec(f"{pool}-{i}", "H100-80GB", 1, pool=pool, labels=off, dra=True)
        for i in range(2)
    ]
    names = fleet.create_nodes(kube, specs)
    with Ledger(kube, pool) as ledger:  # the gate stays closed: any mark of Tessera is "early"
        kube.create(NPG, custom("NodePoolGeometry", pool, dra_spec(pool, ONE_G, maxUnavailable=1)))

        def waiting() -> str | None:
            why, text = reconciling(kube, pool)
            return text if why == "WaitingForDriver" and all(n in text for n in names) else None

        text = eventually(waiting, 120, "Reconciling/WaitingForDriver naming both nodes")
        assert "a layout change waits for it on" in text, text
        obj = npg(kube, pool)
        assert obj is not None and obj["status"]["nodes"]["pending"] == 2, obj["status"]
        assert not ledger.early, ledger.early
        for name in names:  # nothing written: not even the layout's label
            labels = kube.get(path_of("v1", "nodes", name))["metadata"]["labels"]
            assert c.MIG_CONFIG_LABEL not in labels, labels

        # The driver is installed: its plugin publishes, the rollout proceeds and finishes.
        ledger.gate_open.set()
        for name in names:
            label_driver(kube, name, "true")
        wait_ready(kube, pool, 240, "the 1g.10gb layout once the driver publishes")
    assert 0 < ledger.worst <= 1, ledger.worst
    assert_released(kube, pool)
    for name in names:
        assert published(kube, name) == {"1g.10gb": 7}, name


def test_a_converged_node_whose_driver_goes_away_is_not_drained(
    kube: Kube, operator: OperatorProcess, driver: dradriver.DraDriver
) -> None:
    """A driver uninstalled or crashing on a converged pool: its slice goes, the pool waits."""
    pool = "dra-driverlost"
    names = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 2, devices=1, dra=True))
    kube.create(NPG, custom("NodePoolGeometry", pool, dra_spec(pool, ONE_G, maxUnavailable=1)))
    wait_ready(kube, pool, 240, "1g.10gb layout")
    gone = names[0]
    deleted = len(events(kube, gone, "DeletePod"))
    with Ledger(kube, pool) as ledger:
        label_driver(kube, gone, None)  # the DaemonSet leaves the node: the plugin unregisters
        eventually(
            lambda: (
                kube.get_or_none(
                    path_of("resource.k8s.io/v1", "resourceslices", dradriver.slice_name(gone))
                )
                is None
            ),
            60,
            f"{gone}'s slice wiped",
        )

        def waiting() -> str | None:
            why, text = reconciling(kube, pool)
            return text if why == "WaitingForDriver" and gone in text else None

        text = eventually(waiting, 120, f"Reconciling/WaitingForDriver naming {gone}")
        assert names[1] not in text.split(":")[0], text
        obj = npg(kube, pool)
        assert obj is not None and obj["status"]["nodes"]["updated"] == 2, obj["status"]

        label_driver(kube, gone, "true")  # back: it publishes the layout it runs
        wait_ready(kube, pool, 120, "Ready again once the driver publishes")
    assert ledger.worst == 0, ledger.worst  # never cordoned nor tainted
    assert len(events(kube, gone, "DeletePod")) == deleted  # nor its plugin restarted
    assert published(kube, gone) == {"1g.10gb": 7}
    assert_released(kube, pool)
