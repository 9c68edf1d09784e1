"""Whether HAMi's scheduler has read its device config since it last changed, and its traps.

HAMi's scheduler reads ``device-config.yaml`` through a subPath mount, once, at start: a
running pod never sees a change (HAMi chart, scheduler deployment.yaml). So once Tessera changes the file, the
policies naming HAMi say ``RestartPending`` until the ``hami-scheduler`` Deployment's
rollout is complete and every live pod of it was created after the change. The API has no
``restart`` for HAMi (only ``volcano.restart``), so Tessera never restarts it: the message
says how (Manual semantics).

The change's time is the API server's, never the operator's clock: the latest
``managedFields[].time`` of the map as the write that changed it returned (stamped on the map,
with the digest of the file it dates, ``STAMP``). A file whose digest differs from the stamp
changed since (by a person, too) and is stamped again. Times have whole seconds, so the stamp
also names the scheduler pods live once the change was dated: those, and pods created in an
earlier second, have not read it; a pod created later (even in the same second) has.

The idea is Volcano's (``schedulers.volcano.restart``, owned by the Volcano part); this module keeps its
own small copy so the two can change apart.

``--enable-ascend``: without it HAMi's scheduler ignores ``vnpus`` (HAMi pkg/device/ascend/device.go), so Ascend pods
it should place stay Pending — a trap when a policy naming HAMi has Ascend chips.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from tessera.domain.schedulers.demands import ObjectKey

STAMP = "tessera.io/hami-config-changed"
ENABLE_ASCEND = "--enable-ascend"
_TRUE = {"", "1", "t", "T", "true", "TRUE", "True"}  # Go's strconv.ParseBool, bare flag


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stamped(annotations: Mapping[str, str] | None) -> tuple[str, str]:
    """(digest, time) of the stamp on the map; ("", "") when there is none."""
    try:
        found = json.loads((annotations or {}).get(STAMP) or "{}")
    except ValueError:
        return "", ""
    return str(found.get("digest", "")), str(found.get("at", ""))


def recorded(annotations: Mapping[str, str] | None) -> frozenset[str]:
    """The uids of the scheduler pods live when the change was dated (they read the old file)."""
    try:
        found = json.loads((annotations or {}).get(STAMP) or "{}")
    except ValueError:
        return frozenset()
    return frozenset(str(u) for u in found.get("pods") or [])


def stamp(text: str, written: Mapping[str, Any], live: Iterable[str] = ()) -> str | None:
    """The stamp for ``text`` from the object as the API server returned it (its latest
    managedFields time) and the uids of the scheduler pods live after it (``live``: listed
    after that answer, so every pod created before the change is among them); None when the
    server gave no time."""
    times = [str(m.get("time")) for m in written["metadata"].get("managedFields") or []]
    times = [t for t in times if _time(t) is not None]
    if not times:
        return None
    at = max(times, key=lambda t: _time(t) or datetime.min)
    return json.dumps({"digest": digest(text), "at": at, "pods": sorted(live)}, sort_keys=True)


def stale(
    deployment: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    changed_at: str,
    before: frozenset[str] = frozenset(),
) -> list[str] | None:
    """What of the Deployment has not read the change (None: all of it has): its live pods
    created before it — those ``before`` names (live when it was dated), or created in an
    earlier second — or a rollout not complete."""
    change = _time(changed_at)
    if change is None:
        return None
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    match = (spec.get("selector") or {}).get("matchLabels") or {}
    mine = [
        p
        for p in pods
        if match
        and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in match.items())
        and not p["metadata"].get("deletionTimestamp")
    ]
    old = sorted(
        p["metadata"]["name"]
        for p in mine
        if p["metadata"].get("uid") in before or _older(p, change)
    )
    generation = deployment.get("metadata", {}).get("generation", 0)
    complete = status.get("observedGeneration", 0) >= generation and all(
        int(status.get(k) or 0) == replicas for k in ("updatedReplicas", "availableReplicas")
    )
    if not complete and replicas > 0:
        return [*old, "(rollout not complete)"]
    return old or None


def _older(pod: Mapping[str, Any], change: datetime) -> bool:
    created = _time(str(pod["metadata"].get("creationTimestamp", "")))
    return created is None or created < change


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def pending_message(key: ObjectKey, changed_at: str, waiting: list[str]) -> str:
    shown = ", ".join(waiting[:3]) + (f" and {len(waiting) - 3} more" if len(waiting) > 3 else "")
    return (
        f"HAMi's scheduler reads its device config only at start (subPath mount): restart it "
        f"(kubectl -n {key.namespace} rollout restart deployment/{key.name}) to read the "
        f"change of {changed_at}; not yet: {shown}"
    )


def ascend_enabled(deployment: Mapping[str, Any]) -> bool:
    """Whether any container of HAMi's scheduler runs with ``--enable-ascend`` (true)."""
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in pod.get("containers") or []:
        for arg in [*(container.get("command") or []), *(container.get("args") or [])]:
            name, _, value = str(arg).partition("=")
            if name in (ENABLE_ASCEND, ENABLE_ASCEND[1:]) and value in _TRUE:
                return True
    return False


def ascend_trap(key: ObjectKey, chips: Iterable[str]) -> str:
    return (
        f"HAMi's scheduler Deployment {key} runs without --enable-ascend, so it ignores vnpus "
        f"and pods asking for {', '.join(sorted(chips))} stay Pending; install HAMi with "
        "devices.ascend.enabled=true (the chart then passes --enable-ascend=true)"
    )
