"""TenantQuota in DRA units on the real API server: the claim evaluator of kube-apiserver's
quota admission refuses the ResourceClaim that would pass the tenant's total.

A platform engineer gives tenant ``dq`` two MIG 1g.10gb devices across its two namespaces,
counted per DeviceClass (``<class>.deviceclass.resource.k8s.io/devices``), plus a per-namespace
limit on the number of claims. The tenant's users create ResourceClaims in both namespaces at
once. An outside observer sums the devices the claims of that class request across both
namespaces: it never passes 2; freeing one claim lets the next in.
"""

from __future__ import annotations

import concurrent.futures
import itertools
from typing import Any

import pytest

from builders import DeploymentWrapper, custom
from builders.dra import DeviceClassWrapper, ResourceSliceWrapper
from tessera.adapters.kube import ApiError, Kube, path_of

from .conftest import OperatorProcess
from .dra_support import wait_absent
from .helpers import condition, eventually, namespace
from .test_tenantquota import _enforced, _quota, _ready

CLASS = "mig-1g.10gb.tessera.io"
DEVICES = f"{CLASS}.deviceclass.resource.k8s.io/devices"
CLAIMS = "count/resourceclaims.resource.k8s.io"
TQ = "/apis/tessera.io/v1alpha1/tenantquotas"
RESOURCE = "/apis/resource.k8s.io/v1"
SPACES = ("dq-1", "dq-2")
NO_NODES = "qa-no-nodes"  # a pool label no node carries: the tenant's pods stay Pending
MIG_SELECTOR = (  # Tessera's selector form for MIG 1g.10gb (the quota reads any class of it)
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' "
    "&& device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
)


def _claim(name: str, count: int = 1) -> dict[str, Any]:
    request = {"name": "mig", "exactly": {"deviceClassName": CLASS, "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def _requested(kube: Kube) -> int:
    """The outside observer: devices of CLASS requested by every claim in the tenant."""
    total = 0
    for ns in SPACES:
        for claim in kube.list(f"{RESOURCE}/namespaces/{ns}/resourceclaims"):
            for request in claim["spec"]["devices"]["requests"]:
                exactly = request.get("exactly") or {}
                if exactly.get("deviceClassName") == CLASS:
                    total += int(exactly.get("count", 1))
    return total


def _hard(kube: Kube, ns: str) -> dict[str, str]:
    quota = _quota(kube, ns, "dq") or {}
    return dict((quota.get("spec") or {}).get("hard") or {})


@pytest.fixture(scope="module")
def tenant(kube: Kube, operator: OperatorProcess) -> str:
    for ns in SPACES:
        namespace(kube, ns, {"tessera.io/tenant": "dq"})
    spec = {
        "namespaceSelector": {"matchLabels": {"tessera.io/tenant": "dq"}},
        "hard": {CLAIMS: 5},
        "total": {DEVICES: 2},
    }
    kube.create(TQ, custom("TenantQuota", "dq", spec))  # the CRD accepts the DRA names
    eventually(lambda: _ready(kube, "dq"), 60, "TenantQuota dq Ready")
    eventually(lambda: all(_enforced(kube, ns, "dq") for ns in SPACES), 60, "quotas enforced")
    return "dq"


def test_the_quota_keys_are_the_names_the_claim_evaluator_counts(kube: Kube, tenant: str) -> None:
    for ns in SPACES:
        hard = _hard(kube, ns)
        assert set(hard) == {DEVICES, CLAIMS}, hard  # no requests. prefix: nothing would count it
        assert hard[CLAIMS] == "5"
    assert sum(int(_hard(kube, ns)[DEVICES]) for ns in SPACES) <= 2


def test_concurrent_claims_in_two_namespaces_never_exceed_the_total(
    kube: Kube, tenant: str
) -> None:
    # No DeviceClass of that name exists (an earlier test's pool may still be leaving): the
    # evaluator counts claims by the class name alone.
    wait_absent(kube, CLASS)
    names = itertools.count()
    refusals: list[str] = []

    def attempt(ns: str) -> bool:
        try:
            kube.create(f"{RESOURCE}/namespaces/{ns}/resourceclaims", _claim(f"c-{next(names)}"))
        except ApiError as err:
            assert err.status == 403, err
            refusals.append(str(err))
            return False
        return True

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        admitted = sum(pool.map(attempt, list(SPACES) * 6))
    assert 0 < admitted == _requested(kube) <= 2
    assert refusals and all("exceeded quota: tessera-dq" in r for r in refusals), refusals[:2]
    assert any(DEVICES in r for r in refusals), refusals[:2]
    # Headroom moves between the namespaces as the operator rebalances: the total is reached
    # (both devices claimed) and never passed.
    for _ in range(3):
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(attempt, list(SPACES) * 2))
        assert _requested(kube) <= 2
        eventually(lambda: _ready(kube, "dq"), 60, "rebalanced")

    def reached() -> bool:
        if _requested(kube) < 2:
            attempt("dq-1")
            attempt("dq-2")
        return _requested(kube) == 2

    eventually(reached, 60, "the total reached")

    # Freeing one lets the next in, in whichever namespace asks, and only one.
    claims = kube.list(f"{RESOURCE}/namespaces/dq-1/resourceclaims") or kube.list(
        f"{RESOURCE}/namespaces/dq-2/resourceclaims"
    )
    freed = claims[0]["metadata"]
    kube.delete(f"{RESOURCE}/namespaces/{freed['namespace']}/resourceclaims/{freed['name']}")
    eventually(lambda: _requested(kube) < 2 or None, 30, "the claim deleted")
    eventually(lambda: attempt("dq-1") or attempt("dq-2"), 90, "a new claim admitted")
    assert _requested(kube) == 2
    assert not attempt("dq-1") and not attempt("dq-2")
    assert _requested(kube) == 2


def test_a_pods_template_claim_over_the_limit_waits_until_a_pod_is_deleted(
    kube: Kube, operator: OperatorProcess
) -> None:
    """What a user's pods meet: kube-controller-manager creates each pod's claim from its
    template, quota admission refuses the one over the limit and that pod stays Pending with
    no claim; deleting the first pod (its claim goes with it) lets the second one's in."""
    namespace(kube, "dt-1", {"tessera.io/tenant": "dt"})
    spec = {"namespaceSelector": {"matchLabels": {"tessera.io/tenant": "dt"}}, "hard": {DEVICES: 1}}
    kube.create(TQ, custom("TenantQuota", "dt", spec))
    eventually(lambda: _hard_of(kube, "dt-1", "dt") == {DEVICES: "1"}, 60, "dt's quota enforced")
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-slice"},
        "spec": {"spec": _claim("unused")["spec"]},
    }
    kube.create(f"{RESOURCE}/namespaces/dt-1/resourceclaimtemplates", template)
    kube.create(path_of("v1", "pods", namespace="dt-1"), _pod("first"))
    eventually(lambda: _claims_of(kube, "first"), 60, "first's claim created")
    kube.create(path_of("v1", "pods", namespace="dt-1"), _pod("second"))

    def refused() -> str | None:
        events = kube.list(
            path_of("v1", "events", namespace="dt-1"),
            field_selector="involvedObject.name=second,reason=FailedResourceClaimCreation",
        )
        return next((e["message"] for e in events if "exceeded quota" in e["message"]), None)

    message = eventually(refused, 60, "second's claim refused by quota")
    assert "exceeded quota: tessera-dt" in message and DEVICES in message, message
    assert not _claims_of(kube, "second")
    kube.delete(path_of("v1", "pods", "first", "dt-1"))
    eventually(lambda: _claims_of(kube, "second"), 120, "second's claim once first is gone")
    assert len(kube.list(f"{RESOURCE}/namespaces/dt-1/resourceclaims")) <= 1


def _pod(name: str) -> dict[str, Any]:
    """A pod whose claim comes from template one-slice; no node carries its pool: Pending.

    Bare, not a Deployment's: the test follows each pod's own claim and its quota refusal by
    the pod's name, and deleting ``first`` must free its claim rather than bring a replica."""
    spec = DeploymentWrapper(name).pool(NO_NODES).obj()["spec"]["template"]["spec"]
    spec["resourceClaims"] = [{"name": "mig", "resourceClaimTemplateName": "one-slice"}]
    spec["containers"][0]["resources"] = {"claims": [{"name": "mig"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _claims_of(kube: Kube, pod: str) -> list[Any]:
    found = kube.get_or_none(path_of("v1", "pods", pod, "dt-1")) or {}
    return list((found.get("status") or {}).get("resourceClaimStatuses") or [])


def _hard_of(kube: Kube, ns: str, tenant: str) -> dict[str, str]:
    quota = kube.get_or_none(path_of("v1", "resourcequotas", f"tessera-{tenant}", ns)) or {}
    enforced = (quota.get("status") or {}).get("hard") or {}
    return dict(enforced) if enforced == (quota.get("spec") or {}).get("hard") else {}


def test_status_capacity_counts_the_devices_the_slices_offer_the_class(
    kube: Kube, tenant: str
) -> None:
    made = [
        (f"{RESOURCE}/deviceclasses", DeviceClassWrapper(CLASS).selector(MIG_SELECTOR).obj()),
        (
            f"{RESOURCE}/resourceslices",
            ResourceSliceWrapper("dq-node")
            .mig(0, "1g.10gb", 0)
            .mig(0, "1g.10gb", 1)
            .mig(0, "1g.10gb", 2)
            .gpu(1)
            .obj(),
        ),
    ]
    wait_absent(kube, CLASS)  # the hand-made class takes a name Tessera's pools may hold
    for path, body in made:
        kube.create(path, body)
    try:
        _capacity_follows_the_slices(kube)
    finally:  # a hand-made class of a Tessera name would be another test's Conflict
        for path, body in made:
            kube.delete(f"{path}/{body['metadata']['name']}")


def _capacity_follows_the_slices(kube: Kube) -> None:
    def offered() -> int:  # the observer: 1g.10gb MIG devices of every slice of the driver
        return sum(
            1
            for item in kube.list(f"{RESOURCE}/resourceslices")
            if item["spec"]["driver"] == "gpu.nvidia.com"
            for device in item["spec"].get("devices") or []
            if device.get("attributes", {}).get("profile", {}).get("string") == "1g.10gb"
        )

    def capacity() -> dict[str, str] | None:  # read on the next pass (resync)
        status = (kube.get_or_none(f"{TQ}/dq") or {}).get("status") or {}
        found = status.get("capacity") or {}
        return found if found.get(DEVICES) == str(offered()) else None

    assert offered() >= 3
    got = eventually(capacity, 60, "status.capacity of the class = the devices slices offer")
    assert CLAIMS not in got, got  # an object count has no capacity: never a made-up 0
    over = condition(kube.get_or_none(f"{TQ}/dq"), "Overcommitted")
    assert over is not None and over["status"] == "False", over
