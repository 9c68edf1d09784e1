"""Which live objects an Argo CD application tracks, by its annotation (Argo CD 3.x's default).

Argo CD ≥ 3.0 tracks an application's resources with the annotation
``argocd.argoproj.io/tracking-id: APP:GROUP/KIND:NAMESPACE/NAME`` instead of
the ``app.kubernetes.io/instance`` label, so ``tessera plan --prune -l`` cannot
select them; ``--prune-tracking-id APP`` can. An object counts as tracked by
APP when its annotation names APP and the object itself (group, kind, name):
an annotation copied onto another object does not make that one tracked. The
namespace part is not compared: for a cluster-scoped object (all of Tessera's)
Argo CD writes the application's destination namespace there, or nothing.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ANNOTATION = "argocd.argoproj.io/tracking-id"


@dataclass(frozen=True)
class TrackingId:
    app: str
    group: str
    kind: str
    namespace: str
    name: str


def parse(value: str) -> TrackingId | None:
    """``APP:GROUP/KIND:NAMESPACE/NAME`` (GROUP empty for the core group); None if malformed."""
    parts = value.split(":", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    app, group_kind, namespaced = parts
    group, slash, kind = group_kind.partition("/")
    namespace, slash2, name = namespaced.partition("/")
    if not slash or not slash2 or "/" in kind or "/" in name or not kind or not name:
        return None
    return TrackingId(app, group, kind, namespace, name)


def check_app(app: str) -> str:
    """An application name as a tracking id carries it (``NAMESPACE_NAME`` outside argocd)."""
    if not app or ":" in app or "/" in app:
        raise ValueError(f"{app!r} is not an Argo CD application name")
    return app


def tracked_by(obj: Mapping[str, Any], app: str) -> bool:
    """Whether ``obj`` (a live object) carries APP's tracking id for itself."""
    meta = obj.get("metadata") or {}
    found = parse(str((meta.get("annotations") or {}).get(ANNOTATION, "")))
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return (
        found is not None
        and found.app == app
        and (found.group, found.kind, found.name) == (group, obj.get("kind"), meta.get("name"))
    )
