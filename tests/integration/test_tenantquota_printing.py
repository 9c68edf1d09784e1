"""What `kubectl get tq` shows a platform engineer in Conflict and while Overcommitted, and a
quota written as a Kubernetes quantity ("1k") enforced as the number it stands for."""

from __future__ import annotations

import re
from typing import Any

from builders import TenantQuotaWrapper
from devcluster import fleet
from tessera.adapters.kube import Kube, path_of

from .conftest import Kubectl, OperatorProcess
from .helpers import condition, eventually, namespace

TQ = "/apis/tessera.io/v1alpha1/tenantquotas"
HEADER = r"NAME\s+NAMESPACES\s+OVERCOMMITTED\s+READY\s+REASON\s+AGE"


def _tenant(name: str, label: str, **limits: Any) -> dict[str, Any]:
    return TenantQuotaWrapper(name).namespaces(**{"tessera.io/tenant": label}).spec(**limits).obj()


def _current(kube: Kube, name: str, type_: str) -> dict[str, Any] | None:
    obj = kube.get_or_none(f"{TQ}/{name}")
    cond = condition(obj, type_)
    if obj and cond and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]:
        return cond
    return None


def test_kubectl_get_counts_contested_namespaces_in_conflict(
    kube: Kube, kubectl: Kubectl, operator: OperatorProcess
) -> None:
    for ns in ("tqp-shared-1", "tqp-shared-2"):
        namespace(kube, ns, {"tessera.io/tenant": "tqp-shared"})
    for name in ("tqp-a", "tqp-b"):
        kube.create(TQ, _tenant(name, "tqp-shared", hard={"nvidia.com/gpu": 1}))

    def conflict(name: str) -> dict[str, Any] | None:
        stalled = _current(kube, name, "Stalled")
        return stalled if stalled and stalled["reason"] == "Conflict" else None

    # both: each TenantQuota reports its own status, in its own pass
    eventually(lambda: conflict("tqp-a") and conflict("tqp-b"), 60, "both Stalled, Conflict")
    out = kubectl.ok("get", "tq", "tqp-a", "tqp-b")
    assert re.search(HEADER, out), out
    for name in ("tqp-a", "tqp-b"):
        assert re.search(rf"{name}\s+2\s+False\s+False\s+Conflict\s", out), out
    status = kube.get(f"{TQ}/tqp-a")["status"]
    assert status["contested"] == ["tqp-shared-1", "tqp-shared-2"]


def test_kubectl_get_shows_overcommitted(
    kube: Kube, kubectl: Kubectl, operator: OperatorProcess
) -> None:
    fleet.create_nodes(kube, [fleet.NodeSpec("tqp-gpu-0", "A100-40GB", devices=8)])
    namespace(kube, "tqp-over-1", {"tessera.io/tenant": "tqp-over"})
    promise = {"nvidia.com/gpu": 100000}
    kube.create(TQ, _tenant("tqp-over", "tqp-over", hard={"nvidia.com/gpu": 1}, total=promise))

    def overcommitted(value: str) -> dict[str, Any] | None:
        cond = _current(kube, "tqp-over", "Overcommitted")
        ready = _current(kube, "tqp-over", "Ready")
        settled = ready and ready["status"] == "True"
        return cond if cond and cond["status"] == value and settled else None

    eventually(lambda: overcommitted("True"), 60, "tqp-over Ready and Overcommitted=True")
    out = kubectl.ok("get", "tq", "tqp-over")
    assert re.search(HEADER, out), out
    assert re.search(r"tqp-over\s+1\s+True\s+True\s+QuotasApplied\s", out), out
    kube.patch(f"{TQ}/tqp-over", {"spec": {"total": {"nvidia.com/gpu": 1}}})
    eventually(lambda: overcommitted("False"), 60, "tqp-over Overcommitted=False")
    out = kubectl.ok("get", "tq", "tqp-over")
    assert re.search(r"tqp-over\s+1\s+False\s+True\s+QuotasApplied\s", out), out


def test_a_quota_of_1k_is_enforced_as_1000(kube: Kube, operator: OperatorProcess) -> None:
    namespace(kube, "tqp-1k", {"tessera.io/tenant": "tqp-1k"})
    kube.create(TQ, _tenant("tqp-1k", "tqp-1k", hard={"nvidia.com/gpumem": "1k"}))

    def ready() -> dict[str, Any] | None:
        cond = _current(kube, "tqp-1k", "Ready")
        return cond if cond and cond["status"] == "True" else None

    eventually(ready, 60, "tqp-1k Ready")
    quota = kube.get(path_of("v1", "resourcequotas", "tessera-tqp-1k", "tqp-1k"))
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpumem": "1k"}
    status = kube.get(f"{TQ}/tqp-1k")["status"]
    assert status["perNamespace"][0]["hard"] == {"nvidia.com/gpumem": "1000"}
