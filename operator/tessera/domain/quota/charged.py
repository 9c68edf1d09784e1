"""What the quota system charges a namespace, recounted by Tessera from the objects themselves.

``status.used`` can be *lower* than what admission has let in: when a quota's
``spec.hard`` changes, kube-controller-manager's quota controller recomputes
``status.used`` at once from its informer caches (1.34,
``pkg/controller/resourcequota/resource_quota_controller.go``,
``syncResourceQuota`` via ``quota.CalculateUsage``), and a pod or claim that
admission charged a moment earlier may not be in those caches yet. Its write
succeeds (it read the quota after admission's update), so the charge is lost
until the next full resync. The allocation therefore takes as a namespace's
usage the larger of ``status.used`` and this recount (see ``allocation``).

Counted as the evaluators of ``pkg/quota/v1/evaluator/core`` (1.34) do:

- ``pods.go``: a pod is charged while not terminal (phase Succeeded/Failed) and
  not past its deletion grace period; an extended resource is charged its pod
  request (``requests.<resource>``): the containers' sum plus restartable
  (sidecar) init containers, or the largest init container with the sidecars
  started before it if that is more, plus ``spec.overhead``;
- ``resource_claims.go``: every ResourceClaim is charged 1 on
  ``count/resourceclaims.resource.k8s.io``, and per request
  ``<class>.deviceclass.resource.k8s.io/devices``: ExactCount ``count``, All
  32, and for ``firstAvailable`` the largest subrequest per class.

Only resources with a recount here are returned; the others keep ``status.used``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from tessera.api.v1alpha1 import quantity
from tessera.domain.quota.names import device_class, devices_of, is_extended

CLAIMS = "count/resourceclaims.resource.k8s.io"
ALL_DEVICES = 32  # resourceapi.AllocationResultsMaxSize: what the evaluator charges for "All"
Raw = Mapping[str, Any]
Usage = dict[str, dict[str, int]]  # namespace → resource → count


def from_pods(resources: Iterable[str]) -> set[str]:
    """The resources a recount from pods covers: extended ones."""
    return {r for r in resources if is_extended(r)}


def from_claims(resources: Iterable[str]) -> set[str]:
    """The resources a recount from ResourceClaims covers."""
    return {r for r in resources if r == CLAIMS or device_class(r) is not None}


def pods(resources: Iterable[str], items: Iterable[Raw], now: datetime) -> Usage:
    """Per namespace, the pod requests the quota system charges for ``resources``."""
    wanted = from_pods(resources)
    out: Usage = {}
    for pod in items:
        if not wanted or not _charged(pod, now):
            continue
        requests = _pod_requests(pod.get("spec") or {})
        mine = out.setdefault(str(pod["metadata"].get("namespace", "")), dict.fromkeys(wanted, 0))
        for resource in wanted:
            mine[resource] += requests.get(resource, 0)
    return out


def claims(resources: Iterable[str], items: Iterable[Raw]) -> Usage:
    """Per namespace, what the quota system charges for ``resources`` for the claims that exist."""
    wanted = from_claims(resources)
    out: Usage = {}
    for claim in items:
        if not wanted:
            break
        charge = _claim_charge(claim)
        mine = out.setdefault(str(claim["metadata"].get("namespace", "")), dict.fromkeys(wanted, 0))
        for resource in wanted:
            mine[resource] += charge.get(resource, 0)
    return out


def merged(*usages: Usage) -> Usage:
    out: Usage = {}
    for usage in usages:
        for ns, counted in usage.items():
            out.setdefault(ns, {}).update(counted)
    return out


def _charged(pod: Raw, now: datetime) -> bool:
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    deleted, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if deleted is None or grace is None:
        return True
    since = datetime.fromisoformat(str(deleted).replace("Z", "+00:00"))
    return not now > since + timedelta(seconds=int(grace))


def _requests(container: Raw) -> dict[str, int]:
    raw = ((container.get("resources") or {}).get("requests")) or {}
    return {r: _whole(v) for r, v in raw.items() if is_extended(r)}


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for resource, n in more.items():
        into[resource] = into.get(resource, 0) + n


def _pod_requests(spec: Raw) -> dict[str, int]:
    """resourcehelper.PodRequests for extended resources (init containers' max rule)."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        _add(total, _requests(container))
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}
    for init in spec.get("initContainers") or []:
        if init.get("restartPolicy") == "Always":
            _add(sidecars, _requests(init))
            _add(total, _requests(init))
            step = dict(sidecars)
        else:
            step = dict(sidecars)
            _add(step, _requests(init))
        for resource, n in step.items():
            peak[resource] = max(peak.get(resource, 0), n)
    out = {r: max(total.get(r, 0), peak.get(r, 0)) for r in total.keys() | peak.keys()}
    _add(out, {r: _whole(v) for r, v in (spec.get("overhead") or {}).items() if is_extended(r)})
    return out


def _claim_charge(claim: Raw) -> dict[str, int]:
    out = {CLAIMS: 1}
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        if request.get("firstAvailable"):
            worst: dict[str, int] = {}
            for sub in request["firstAvailable"]:
                key = devices_of(str(sub.get("deviceClassName", "")))
                worst[key] = max(worst.get(key, 0), _devices(sub))
            _add(out, worst)
        elif request.get("exactly"):
            exactly = request["exactly"]
            _add(out, {devices_of(str(exactly.get("deviceClassName", ""))): _devices(exactly)})
    return out


def _devices(request: Raw) -> int:
    mode = request.get("allocationMode") or "ExactCount"
    if mode == "ExactCount":
        return int(request.get("count") or 1)
    return ALL_DEVICES if mode == "All" else 0


def _whole(value: object) -> int:
    # The API server refuses fractional extended requests, so a count is whole; anything
    # else is no request Tessera can count (the quota system's own count still applies).
    if not isinstance(value, int | str):
        return 0
    try:
        return quantity.whole(value)
    except quantity.QuantityError:
        return 0
