"""Whether Volcano's scheduler has read Tessera's change, and the restart that makes it.

Volcano reads its device config once, at start, so a change counts only once every live
scheduler pod started after it. A pod has when it carries the pod-template annotation
``kubectl.kubernetes.io/restartedAt`` at or after the change (``kubectl rollout restart``,
or Tessera's own restart, stamps it), or was created after the change (someone deleted the
pods). Times are RFC 3339 with seconds, as the API server writes them; a pod created in the
very second of the change is not counted as newer (never a false "read it").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from .demands import ObjectKey

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


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


def pending_message(key: ObjectKey, changed_at: str, stale: list[str], automatic: bool) -> str:
    pods = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
    if automatic:
        return f"Volcano's Deployment {key} is restarting to read the change of {changed_at} (pods {pods} still older)"
    return (
        f"Volcano reads its device config only at start: restart Deployment {key} "
        f"(kubectl -n {key.namespace} rollout restart deployment/{key.name}) to read the "
        f"change of {changed_at}; pods {pods} started before it"
    )
