"""Tessera's admission objects of one policy: desired against observed.

An object is Tessera's when it carries ``app.kubernetes.io/managed-by: tessera`` and its
``tessera.io/declared-by`` names the policy; only those are updated or deleted. A desired
name held by an object that is not Tessera's is a conflict: left alone, and the policy
says so. The API server defaults fields Tessera does not set (``scope``, selectors), so
an object matches when every field Tessera wrote has the value it wrote; a list of a
different length (a validation added or removed by hand) does not match.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tessera.api import constants as c
from tessera.domain.base.conditions import Verdict
from tessera.domain.dra.naming import DECLARED_BY_ANNOTATION

Obj = dict[str, Any]


@dataclass(frozen=True)
class ContractChange:
    verb: Literal["create", "update", "delete"]
    kind: str
    name: str
    body: Obj | None = None  # create: the manifest; update: the object read, Tessera's parts in
    resource_version: str = ""  # update, delete: as read


@dataclass(frozen=True)
class Changes:
    writes: tuple[ContractChange, ...] = ()
    conflicts: tuple[str, ...] = ()  # "ValidatingAdmissionPolicy <name>" held by another
    current: tuple[str, ...] = field(default=())  # kinds whose object already matches


def owned(obj: Mapping[str, Any], who: str) -> bool:
    meta = obj.get("metadata") or {}
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    return (
        labels.get(c.MANAGED_BY_LABEL) == c.MANAGED_BY_VALUE
        and notes.get(DECLARED_BY_ANNOTATION) == who
    )


def diff(
    who: str,
    desired: Sequence[Mapping[str, Any]],
    observed: Sequence[Mapping[str, Any]],
    kinds: Sequence[str],
) -> Changes:
    """``desired``: the wanted objects (none when the policy wants none); ``observed``: the
    objects of those names found, by kind in ``kinds`` order (a policy before its binding).
    Creates and updates in ``kinds`` order, deletes in reverse (the binding goes first).
    A wanted name held by an object Tessera does not own is a conflict; then nothing is
    created or updated (a binding would bind the other's policy) and Tessera's part goes."""
    want = {d["kind"]: d for d in desired}
    have = {o["kind"]: o for o in observed}
    conflicts = tuple(
        f"{k} {have[k]['metadata']['name']}"
        for k in kinds
        if k in want and k in have and not owned(have[k], who)
    )
    if conflicts:
        want = {}
    writes: list[ContractChange] = []
    deletes: list[ContractChange] = []
    current: list[str] = []
    for kind in kinds:
        new, old = want.get(kind), have.get(kind)
        if old is not None and not owned(old, who):
            continue  # not Tessera's: never touched
        version = str((old or {}).get("metadata", {}).get("resourceVersion", ""))
        if old is None:
            if new is not None:
                writes.append(ContractChange("create", kind, new["metadata"]["name"], dict(new)))
        elif new is None:
            deletes.append(ContractChange("delete", kind, old["metadata"]["name"], None, version))
        elif _holds(old, new):
            current.append(kind)
        else:
            body = _merged(old, new)
            writes.append(ContractChange("update", kind, new["metadata"]["name"], body, version))
    return Changes((*writes, *reversed(deletes)), conflicts, tuple(current))


def _holds(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    meta_old, meta_new = old.get("metadata") or {}, new.get("metadata") or {}
    for part in ("labels", "annotations"):
        if not _within(meta_new.get(part) or {}, meta_old.get(part) or {}):
            return False
    return _within(new.get("spec"), old.get("spec"))


def _within(want: Any, have: Any) -> bool:
    """Every field of ``want`` has its value in ``have`` (defaults ``have`` gained aside)."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(_within(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(want) == len(have)
            and all(_within(w, h) for w, h in zip(want, have, strict=True))
        )
    return bool(want == have)


def _merged(old: Mapping[str, Any], new: Mapping[str, Any]) -> Obj:
    """The object as read with Tessera's labels and annotations merged in and its spec
    replaced (others' labels and annotations kept); a PUT of it names the version read."""
    body = copy.deepcopy(dict(old))
    body["apiVersion"], body["kind"] = new["apiVersion"], new["kind"]
    meta = body.setdefault("metadata", {})
    meta.setdefault("labels", {}).update(new["metadata"].get("labels") or {})
    meta.setdefault("annotations", {}).update(new["metadata"].get("annotations") or {})
    body["spec"] = copy.deepcopy(new["spec"])
    return body


def conflict_message(conflicts: Sequence[str], who: str) -> str:
    return (
        f"{' and '.join(conflicts)} exist(s) and are not Tessera's (label "
        f"{c.MANAGED_BY_LABEL}={c.MANAGED_BY_VALUE} and annotation {DECLARED_BY_ANNOTATION}="
        f"{who}): the pod contract is not enforced until it is deleted or renamed"
    )


def with_conflicts(base: Verdict, conflicts: Sequence[str], who: str) -> Verdict:
    """A wanted name held by an object Tessera does not own stalls the policy (``Conflict``);
    one already Stalled for another reason keeps that reason and says both."""
    if not conflicts:
        return base
    text = conflict_message(conflicts, who)
    if base.state == "stalled":
        return Verdict("stalled", base.reason, f"{base.message}; {text}", base.extra)
    return Verdict("stalled", "Conflict", text, base.extra)
