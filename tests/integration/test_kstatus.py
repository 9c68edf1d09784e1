"""kstatus readings of Tessera's objects, computed by the kstatus library itself.

hack/kstatus is a few lines of Go around sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute,
the code Flux and other kstatus consumers run. Every reading here is of an object the real
API server returned, with the status the running operator wrote:

- new: the create response (the CRD's status default says "observed generation 0");
- progressing: the response to a spec edit (the operator has not seen the new generation),
  and a NodePoolGeometry held for approval (Reconciling=True);
- stalled: conflicts, an impossible layout, a pool or policy on no node (Stalled=True);
- ready: converged objects (Ready=True).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from builders import custom
from devcluster import fleet
from tessera.adapters.kube import Kube

from .conftest import OperatorProcess
from .helpers import condition, eventually, namespace
from .tools import tool

API = "/apis/tessera.io/v1alpha1"
PLURALS = {
    "NodePoolGeometry": "nodepoolgeometries",
    "SharingPolicy": "sharingpolicies",
    "TenantQuota": "tenantquotas",
}


def kstatus(obj: dict[str, Any]) -> dict[str, str]:
    out = subprocess.run(
        [str(tool("kstatus"))], input=json.dumps(obj), capture_output=True, text=True, check=True
    )
    reading: dict[str, str] = json.loads(out.stdout)
    return reading


def specs(name: str) -> dict[str, dict[str, Any]]:
    """A valid spec per kind, selecting nodes / namespaces labelled ``name``."""
    nodes = {"matchLabels": {"tessera.io/pool": name}}
    return {
        "NodePoolGeometry": {
            "nodeSelector": nodes,
            "mig": {"layouts": [{"profiles": {"1g.10gb": 7}}]},
            "rollout": {"approval": "Manual"},
        },
        "SharingPolicy": {
            "nodeSelector": nodes,
            "backend": "TimeSlicing",
            "timeSlicing": {"replicas": 2},
        },
        "TenantQuota": {
            "namespaceSelector": {"matchLabels": {"tessera.io/tenant": name}},
            "hard": {"nvidia.com/gpu": 2},
        },
    }


def edit(kind: str) -> dict[str, Any]:
    """A spec change per kind (a new generation)."""
    return {
        "NodePoolGeometry": {"spec": {"rollout": {"maxUnavailable": 2}}},
        "SharingPolicy": {"spec": {"timeSlicing": {"replicas": 3}}},
        "TenantQuota": {"spec": {"hard": {"nvidia.com/gpu": 3}}},
    }[kind]


def observed(kube: Kube, path: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        obj = kube.get_or_none(path)
        status = (obj or {}).get("status") or {}
        ok = obj and status.get("observedGeneration") == obj["metadata"]["generation"]
        return obj if ok and check(obj) else None

    return eventually(probe, 60, f"{path} observed")


def is_true(type_: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (condition(obj, type_) or {}).get("status") == "True"


@pytest.mark.parametrize("kind", sorted(PLURALS))
def test_new_progressing_and_ready(kube: Kube, operator: OperatorProcess, kind: str) -> None:
    name = f"ks-{kind.lower()}"
    namespace(kube, "gpu-operator")
    path = f"{API}/{PLURALS[kind]}/{name}"

    created = kube.create(f"{API}/{PLURALS[kind]}", custom(kind, name, specs(name)[kind]))
    assert kstatus(created) == {
        "status": "InProgress",
        "message": f"{kind} generation is 1, but latest observed generation is 0",
    }

    # nothing selected: a tenant has nothing to do, a pool or policy on no node is no success
    settled = "Ready" if kind == "TenantQuota" else "Stalled"
    reading = "Current" if kind == "TenantQuota" else "Failed"
    assert kstatus(observed(kube, path, is_true(settled)))["status"] == reading

    edited = kube.patch(path, edit(kind))
    assert edited["status"]["observedGeneration"] == 1  # the response predates the operator
    assert kstatus(edited) == {
        "status": "InProgress",
        "message": f"{kind} generation is 2, but latest observed generation is 1",
    }
    assert kstatus(observed(kube, path, is_true(settled)))["status"] == reading


def test_a_geometry_waiting_for_approval_is_in_progress(
    kube: Kube, operator: OperatorProcess
) -> None:
    namespace(kube, "gpu-operator")
    fleet.create_nodes(kube, fleet.pool("ks-approval", "H100-80GB", 1))
    spec = specs("ks-approval")["NodePoolGeometry"]
    kube.create(f"{API}/nodepoolgeometries", custom("NodePoolGeometry", "ks-approval", spec))
    obj = observed(kube, f"{API}/nodepoolgeometries/ks-approval", is_true("Reconciling"))
    reconciling = condition(obj, "Reconciling") or {}
    assert reconciling["reason"] == "WaitingForApproval"
    assert kstatus(obj) == {"status": "InProgress", "message": reconciling["message"]}


def _stalled(kube: Kube, kind: str, name: str) -> dict[str, str]:
    obj = observed(kube, f"{API}/{PLURALS[kind]}/{name}", is_true("Stalled"))
    stalled = condition(obj, "Stalled") or {}
    reading = kstatus(obj)
    assert reading == {"status": "Failed", "message": stalled["message"]}
    return stalled


def test_stalled_objects_read_failed(kube: Kube, operator: OperatorProcess) -> None:
    namespace(kube, "gpu-operator")
    # Two tenants claiming one namespace.
    namespace(kube, "ks-shared", {"tessera.io/tenant": "ks-shared"})
    for tenant in ("ks-tq-a", "ks-tq-b"):
        spec = specs("ks-shared")["TenantQuota"]
        kube.create(f"{API}/tenantquotas", custom("TenantQuota", tenant, spec))
    assert _stalled(kube, "TenantQuota", "ks-tq-a")["reason"] == "Conflict"

    # Two sharing policies selecting one node.
    fleet.create_nodes(kube, fleet.pool("ks-overlap", "H100-80GB", 1))
    for policy in ("ks-sp-a", "ks-sp-b"):
        spec = specs("ks-overlap")["SharingPolicy"]
        kube.create(f"{API}/sharingpolicies", custom("SharingPolicy", policy, spec))
    assert _stalled(kube, "SharingPolicy", "ks-sp-a")["reason"] == "Conflict"

    # A layout the pool's GPU model cannot hold.
    fleet.create_nodes(kube, fleet.pool("ks-bad", "A30-24GB", 1, devices=4))
    spec = {
        "nodeSelector": {"matchLabels": {"tessera.io/pool": "ks-bad"}},
        "mig": {"layouts": [{"profiles": {"4g.24gb": 1, "1g.6gb": 1}}]},
    }
    kube.create(f"{API}/nodepoolgeometries", custom("NodePoolGeometry", "ks-bad", spec))
    assert _stalled(kube, "NodePoolGeometry", "ks-bad")["reason"] == "InvalidGeometryForModel"
