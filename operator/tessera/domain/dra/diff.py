"""Observed DeviceClasses against the desired set: what to create, update, delete — and refuse.

Only classes carrying Tessera's label (``app.kubernetes.io/managed-by: tessera``) are
Tessera's: one of a desired name without it was written by someone else and is never
touched; its declarers are ``Stalled``, reason ``Conflict``, naming it. A Tessera class no
one declares any more is deleted, unless a refused (``held``) declarer still names it — and
a held declarer stays in the ``declared-by`` of a class others declare too.

After each write the controller compares what the API server stored with what it sent
(``dropped``): on 1.34 a field of a disabled alpha feature gate is silently removed, which
must be a ``Stalled`` ``FieldDropped`` naming field and gate (see
docs/dra.md §What the API server drops).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tessera.api import constants as c
from tessera.domain.dra.classes import DesiredClass, DesiredClasses
from tessera.domain.dra.naming import DECLARED_BY_ANNOTATION

GATES = {
    "spec.extendedResourceName": "DRAExtendedResource",
}
"""A DeviceClass field of an alpha Kubernetes feature gate (off in 1.34) → that gate."""


@dataclass(frozen=True)
class ClassChanges:
    create: tuple[DesiredClass, ...] = ()
    update: tuple[tuple[DesiredClass, str], ...] = ()
    """With the resourceVersion read: an update that meets another writer gets a 409."""
    delete: tuple[tuple[str, str], ...] = ()
    """(name, resourceVersion) of Tessera classes no one declares."""
    conflicts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """A desired name held by a class Tessera does not own → its declarers."""

    @property
    def writes(self) -> int:
        return len(self.create) + len(self.update) + len(self.delete)


def owned(obj: Mapping[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return bool(labels.get(c.MANAGED_BY_LABEL) == c.MANAGED_BY_VALUE)


def declarers(obj: Mapping[str, Any]) -> tuple[str, ...]:
    text = (obj.get("metadata", {}).get("annotations") or {}).get(DECLARED_BY_ANNOTATION, "")
    return tuple(d for d in str(text).split(",") if d)


def diff(desired: DesiredClasses, observed: Iterable[Mapping[str, Any]]) -> ClassChanges:
    """The writes that make the observed classes the desired ones; hand-made ones are kept."""
    seen = {obj["metadata"]["name"]: obj for obj in observed}
    create: list[DesiredClass] = []
    update: list[tuple[DesiredClass, str]] = []
    conflicts: dict[str, tuple[str, ...]] = {}
    for name, want in sorted(desired.classes.items()):
        obj = seen.get(name)
        if obj is None:
            create.append(want)
        elif not owned(obj):
            conflicts[name] = want.declared_by
        elif not matches(want := _keeping_held(want, obj, desired.held), obj):
            update.append((want, str(obj["metadata"].get("resourceVersion", ""))))
    delete = [
        (name, str(obj["metadata"].get("resourceVersion", "")))
        for name, obj in sorted(seen.items())
        if owned(obj) and name not in desired.classes and not set(declarers(obj)) & desired.held
    ]
    return ClassChanges(tuple(create), tuple(update), tuple(delete), conflicts)


def _keeping_held(want: DesiredClass, obj: Mapping[str, Any], held: frozenset[str]) -> DesiredClass:
    """``want`` still naming the held declarers ``obj`` names: a refused or unparsable declarer
    keeps its claim on a shared class, which is never deleted while it names it."""
    kept = set(declarers(obj)) & held
    if kept <= set(want.declared_by):
        return want
    return replace(want, declared_by=tuple(sorted({*want.declared_by, *kept})))


def matches(want: DesiredClass, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` already is ``want``: spec, label and declared-by (other labels kept)."""
    spec = obj.get("spec") or {}
    sent = want.spec()
    same_spec = spec.get("selectors") == sent["selectors"] and (spec.get("config") or None) == (
        sent.get("config") or None
    )
    return same_spec and owned(obj) and declarers(obj) == want.declared_by


def dropped(sent: Any, stored: Any, path: str = "spec") -> tuple[str, ...]:
    """Field paths present in ``sent`` but absent (or emptied) in ``stored``."""
    if isinstance(sent, Mapping):
        if not isinstance(stored, Mapping):
            return (path,) if sent else ()
        out: list[str] = []
        for key, value in sent.items():
            if key not in stored or (value not in (None, {}, []) and stored[key] in (None, {}, [])):
                out.append(f"{path}.{key}")
            else:
                out.extend(dropped(value, stored[key], f"{path}.{key}"))
        return tuple(out)
    if isinstance(sent, Sequence) and not isinstance(sent, str):
        if not isinstance(stored, Sequence) or isinstance(stored, str) or len(stored) < len(sent):
            return (path,)
        return tuple(p for i, v in enumerate(sent) for p in dropped(v, stored[i], f"{path}[{i}]"))
    return ()


def dropped_message(name: str, paths: Sequence[str]) -> str:
    """The ``FieldDropped`` message: each field, and the feature gate that would keep it."""
    parts = []
    for path in paths:
        gate = GATES.get(path)
        why = f"feature gate {gate} is off" if gate else "a Kubernetes feature gate is off"
        parts.append(f"{path} ({why} on the API server)")
    return f"DeviceClass {name}: the API server dropped " + ", ".join(parts) + " without an error"
