"""Whether Volcano's scheduler has read Tessera's change, and the restart that makes it.

Volcano reads its device config once, at start, so a change counts only once the
Deployment's rollout is complete (its controller saw the latest spec, and every replica is
updated and available: a crash-looping new pod is not "read it") and every live scheduler
pod started after it. A pod has when it carries the pod-template annotation
``kubectl.kubernetes.io/restartedAt`` at or after the change (``kubectl rollout restart``,
or Tessera's own restart, stamps it), or was created after the change (someone deleted the
pods). Every time is the API server's (``written_at``: the time of Tessera's write, from the
response's managedFields), never the operator's clock; RFC 3339 with seconds, so a pod
created in the very second of the change is not counted as newer (never a false "read it").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from tessera.domain.schedulers.demands import ObjectKey

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def is_time(text: str) -> bool:
    return _time(text) is not None


def written_at(obj: Mapping[str, Any], manager: str) -> str:
    """The API server's time of ``manager``'s last write of ``obj`` (its managedFields entry,
    as the write's response holds it); "" when the response carries none."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    mine = [str(e.get("time") or "") for e in entries if e.get("manager") == manager]
    stamps = [t for t in mine if _time(t) is not None]
    return max(stamps, key=lambda t: _time(t) or datetime.min, default="")


def rollout_incomplete(deployment: Mapping[str, Any]) -> str:
    """Why the Deployment's rollout is not complete ("" when it is): its controller has not
    seen the latest spec, or not every replica is updated and available (as ``kubectl
    rollout status`` waits)."""
    meta = deployment.get("metadata") or {}
    status = deployment.get("status") or {}
    spec = deployment.get("spec") or {}
    want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return "its controller has not seen the latest spec yet"
    counts = {k: int(status.get(k) or 0) for k in ("updatedReplicas", "availableReplicas")}
    counts["replicas"] = int(status.get("replicas") or 0)
    if any(n != want for n in counts.values()):
        said = ", ".join(f"{k} {n}" for k, n in counts.items())
        return f"rollout not complete: {said} of {want}"
    return ""


def patch(changed_at: str) -> dict[str, Any]:
    """The merge patch ``kubectl rollout restart`` sends, stamped with the change's time."""
    notes = {RESTARTED_AT: changed_at}
    return {"spec": {"template": {"metadata": {"annotations": notes}}}}


def due(deployment: Mapping[str, Any], changed_at: str) -> bool:
    """True when the Deployment's template was not restarted since the change (once per
    change: Tessera's own restart stamps the change's time)."""
    template = (deployment.get("spec") or {}).get("template") or {}
    stamp = _time(((template.get("metadata") or {}).get("annotations") or {}).get(RESTARTED_AT, ""))
    change = _time(changed_at)
    return change is not None and (stamp is None or stamp < change)


def stale_pods(
    deployment: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], changed_at: str
) -> list[str] | None:
    """The Deployment's live pods that started before the change (None: none did)."""
    change = _time(changed_at)
    if change is None:
        return None
    spec = deployment.get("spec") or {}
    match = ((spec.get("selector") or {}).get("matchLabels")) or {}
    mine = [
        p
        for p in pods
        if match
        and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in match.items())
        and not p["metadata"].get("deletionTimestamp")
    ]
    stale = sorted(p["metadata"]["name"] for p in mine if not _newer(p, change))
    if not mine and int(spec.get("replicas", 1) or 0) > 0:
        return ["(no pod yet)"]
    return stale or None


def _newer(pod: Mapping[str, Any], change: datetime) -> bool:
    meta = pod["metadata"]
    stamp = _time((meta.get("annotations") or {}).get(RESTARTED_AT, ""))
    created = _time(str(meta.get("creationTimestamp", "")))
    return (stamp is not None and stamp >= change) or (created is not None and created > change)


def pending(
    deployment: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], changed_at: str
) -> str:
    """What keeps the Deployment from having read the change ("" when nothing does)."""
    stale = stale_pods(deployment, pods, changed_at)
    why = [rollout_incomplete(deployment)]
    if stale:
        more = f" and {len(stale) - 3} more" if len(stale) > 3 else ""
        why.append(f"pods {', '.join(stale[:3])}{more} started before it")
    return "; ".join(w for w in why if w)


def pending_message(key: ObjectKey, changed_at: str, why: str, automatic: bool) -> str:
    if automatic:
        return (
            f"Volcano's Deployment {key} is restarting to read the change of {changed_at} ({why})"
        )
    return (
        f"Volcano reads its device config only at start: restart Deployment {key} "
        f"(kubectl -n {key.namespace} rollout restart deployment/{key.name}) to read the "
        f"change of {changed_at}; {why}"
    )
