"""Issue 28, item 4, on a 1.34 cluster as it comes: no ``DRADeviceTaints``, no DeviceTaintRule.

A control plane of its own (``device_taints=False``: the gate off everywhere, the alpha
version not served), the operator under config/rbac's ServiceAccount, the simulated MIG manager
and DRA driver. A DRA pool's layout changes; the pool says in its ``DeviceTaints`` condition
that the rules are not served and the node is held by its cordon and taint only, and the
rollout goes on as it did before rules existed (an outside ``Ledger`` sees the hold) — not a
false green: the condition is False, with the flags that would serve the rules.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from builders import custom
from devcluster import dradriver, fleet
from devcluster.controlplane import ControlPlane, find_binaries
from devcluster.identity import OPERATOR
from tessera.adapters.kube import ApiError, Kube

from .conftest import ROOT, Kubectl, OperatorProcess, service_account_kubeconfig
from .faults import NPG, assert_released, npg, pool_spec, wait_ready
from .helpers import condition, eventually, gpu_agents, namespace
from .rollout_ledger import Ledger

pytestmark = pytest.mark.integration
WHOLE = {"mig": {"layouts": [{"devices": "all", "profiles": {}}]}}
SPLIT = {
    "mig": {
        "layouts": [
            {"devices": "0", "profiles": {"1g.10gb": 7}},
            {"devices": "1-3", "profiles": {}},
        ]
    }
}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, OperatorProcess]]:
    """A cluster without device taints, Tessera running in it under its own ServiceAccount."""
    with ControlPlane(find_binaries(), device_taints=False) as plane:
        kubectl = Kubectl(plane)
        kubectl.ok("apply", "--server-side", "-k", str(ROOT / "crds"))
        kubectl.ok("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        ns = f"{{kind: Namespace, apiVersion: v1, metadata: {{name: {OPERATOR.namespace}}}}}"
        kubectl.ok("apply", "-f", "-", stdin=ns)
        kubectl.ok("apply", "-f", str(ROOT / "config" / "agent" / "namespace.yaml"))
        kubectl.ok("apply", "-k", str(ROOT / "config" / "rbac"))
        folder = tmp_path_factory.mktemp("plain-operator")
        token = service_account_kubeconfig(plane, folder / "tessera.kubeconfig")
        kube = Kube.from_kubeconfig(str(plane.kubeconfig))
        operator = OperatorProcess(plane, folder / "operator.log", kubeconfig=token).start()
        try:
            with gpu_agents(kube):
                sim = dradriver.DraDriver(kube).start()
                try:
                    yield kube, operator
                finally:
                    sim.stop()
        finally:
            operator.stop()
            kube.close()
        operator.assert_clean_log()


def test_without_the_gate_the_pool_says_so_and_holds_the_node_whole(
    plain: tuple[Kube, OperatorProcess],
) -> None:
    kube, _ = plain
    with pytest.raises(ApiError) as err:
        kube.list("/apis/resource.k8s.io/v1alpha3/devicetaintrules")
    assert err.value.not_found, "this cluster must not serve DeviceTaintRules"
    pool = "dra-plain"
    namespace(kube, "plain-ns")
    [node] = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1, devices=4, dra=True))
    spec = {**pool_spec(pool, WHOLE, maxUnavailable=1), "allocation": "DRA"}
    kube.create(NPG, custom("NodePoolGeometry", pool, spec))
    wait_ready(kube, pool, 180, "whole GPUs on the DRA pool")
    with Ledger(kube, pool) as ledger:
        ledger.gate_open.set()
        kube.patch(f"{NPG}/{pool}", {"spec": SPLIT})
        wait_ready(kube, pool, 150, "GPU 0 repartitioned without device taints")
    assert ledger.worst == 1, f"{node} was held (cordon and taint) for its window"
    found = condition(npg(kube, pool), "DeviceTaints")
    assert found is not None and found["status"] == "False", found
    assert found["reason"] == "DeviceTaintRulesNotServed"
    assert "DRADeviceTaints" in found["message"] and "cordon" in found["message"]
    assert_released(kube, pool)
    kube.delete(f"{NPG}/{pool}")
    eventually(lambda: npg(kube, pool) is None, 120, "the pool's finalizer ran without the API")
