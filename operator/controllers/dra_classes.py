"""Tessera's DeviceClasses, written from the NodePoolGeometry and SharingPolicy passes.

Classes are shared: ``gpu.tessera.io`` serves every DRA pool of whole GPUs, and a class may
be declared by a pool and named by a policy's pass at the same moment. So no pass writes
"its own" classes: every pass of either kind runs ``sync``, which computes the one desired
set from ALL pools and policies (``tessera.domain.dra.desired_classes``) and makes the
cluster match it. Two passes can only ever agree on what to write. Concurrency is handled
twice over: within the operator one lock serialises syncs (one writer, like the sharing
passes' lock), and every write names the resourceVersion it was planned from — an update is
a PUT of the object as read, a delete carries a precondition, a create fails if the name
exists — so a write racing another writer (a second operator during a Lease hand-over, a
person) is a 409 and the sync re-reads and re-plans, up to ``ATTEMPTS`` times. A converged
cluster costs three lists and no write.

After each create or update the object the API server returns is compared with what was
sent: a field it dropped (an alpha field whose feature gate is off) is ``FieldDropped``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tessera.adapters import dra as api
from tessera.adapters.kube import ApiError, Obj
from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain import dra, selectors
from tessera.domain.cluster import PoolObservation
from tessera.domain.conditions import Verdict
from tessera.domain.dra import naming, slices

from .runtime import Context, custom_path

log = logging.getLogger("tessera.dra")
ATTEMPTS = 5
WAITING_FOR_DRIVER = "WaitingForDriver"
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Synced:
    """What one sync found and did; each declarer's part is read with ``verdict``."""

    desired: dra.DesiredClasses = field(default_factory=dra.DesiredClasses)
    conflicts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    dropped: Mapping[str, str] = field(default_factory=dict)
    """Class name → the FieldDropped message."""
    writes: int = 0

    def classes_of(self, who: str) -> tuple[str, ...]:
        return self.desired.declared.get(who, ())

    def verdict(self, who: str) -> Verdict | None:
        """Stalled when the declarer is refused, collides with a class not Tessera's, or a
        class it declares lost a field; None when nothing is wrong with its classes."""
        problems = self.desired.problems.get(who)
        if problems:
            text = "; ".join(map(str, problems)) + " (no DeviceClass written)"
            return Verdict("stalled", problems[0].reason, text)
        taken = sorted(n for n, by in self.conflicts.items() if who in by)
        if taken:
            text = (
                f"DeviceClass {', '.join(taken)} exists and is not Tessera's (no label "
                f"{c.MANAGED_BY_LABEL}={c.MANAGED_BY_VALUE}); it is left untouched: delete or "
                "rename it to let Tessera write its class"
            )
            return Verdict("stalled", "Conflict", text)
        lost = [self.dropped[n] for n in self.classes_of(who) if n in self.dropped]
        if lost:
            return Verdict("stalled", "FieldDropped", "; ".join(lost))
        return None


def sync(ctx: Context, nodes: Iterable[Obj], *, without: str = "") -> Synced:
    """Make the cluster's Tessera DeviceClasses the desired set; ``without`` (``Kind/name``)
    leaves out an object being deleted (its finalizer calls this)."""
    labels = [(n["metadata"].get("labels") or {}) for n in nodes]
    with _LOCK:
        for _ in range(ATTEMPTS):
            desired = dra.desired_classes(*_declarations(ctx, labels, without))
            observed = api.list_classes(ctx.kube)
            changes = dra.diff(desired, observed)
            try:
                dropped = _apply(ctx, changes, observed)
            except ApiError as err:
                if not (err.conflict or err.not_found):
                    raise
                log.info("DeviceClasses changed while Tessera wrote them (%s); re-planning", err)
                continue
            return Synced(desired, changes.conflicts, dropped, changes.writes)
    raise ApiError(409, "Conflict", "DeviceClasses kept changing while Tessera wrote them")


def _declarations(
    ctx: Context, labels: list[Mapping[str, str]], without: str
) -> tuple[dict[str, dra.PoolInput], dict[str, SharingPolicySpec]]:
    pools: dict[str, dra.PoolInput] = {}
    for obj in ctx.kube.list(custom_path("nodepoolgeometries")):
        name = obj["metadata"]["name"]
        if _gone(obj, naming.declarer("NodePoolGeometry", name), without):
            continue
        try:
            spec = NodePoolGeometrySpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            continue  # the pool reports InvalidSpec; its classes are written once it parses
        pools[name] = dra.PoolInput(spec, _most_gpus(spec.node_selector, labels))
    policies: dict[str, SharingPolicySpec] = {}
    for obj in ctx.kube.list(custom_path("sharingpolicies")):
        name = obj["metadata"]["name"]
        if _gone(obj, naming.declarer("SharingPolicy", name), without):
            continue
        try:
            policies[name] = SharingPolicySpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            continue
    return pools, policies


def _gone(obj: Obj, who: str, without: str) -> bool:
    return who == without or bool(obj["metadata"].get("deletionTimestamp"))


def _most_gpus(selector: LabelSelector, labels: list[Mapping[str, str]]) -> int | None:
    counts = [
        int(found.get(c.GPU_COUNT_LABEL, "0") or 0)
        for found in labels
        if selectors.matches(selector, found) and str(found.get(c.GPU_COUNT_LABEL, "0")).isdigit()
    ]
    return max(counts) if counts else None


def _apply(ctx: Context, changes: dra.ClassChanges, observed: list[Obj]) -> dict[str, str]:
    """Creates and updates, then deletes; a dropped field is noted per class."""
    dropped: dict[str, str] = {}
    current = {o["metadata"]["name"]: o for o in observed}
    for want in changes.create:
        stored = api.create_class(ctx.kube, want.manifest())
        log.info("DeviceClass %s created for %s", want.name, ",".join(want.declared_by))
        _note(dropped, want, stored)
    for want, version in changes.update:
        obj = current.get(want.name)
        if obj is None or str(obj["metadata"].get("resourceVersion")) != version:
            raise ApiError(409, "Conflict", f"DeviceClass {want.name} changed since it was read")
        stored = api.replace_class(ctx.kube, obj, want.metadata(), want.spec())
        log.info("DeviceClass %s updated for %s", want.name, ",".join(want.declared_by))
        _note(dropped, want, stored)
    for name, version in changes.delete:
        api.delete_class(ctx.kube, name, version)
        log.info("DeviceClass %s deleted: no pool or policy declares it", name)
    return dropped


def _note(dropped: dict[str, str], want: dra.DesiredClass, stored: Obj) -> None:
    lost = dra.dropped(want.spec(), stored.get("spec") or {})
    if lost:
        dropped[want.name] = dra.dropped_message(want.name, lost)
        log.error("%s", dropped[want.name])


def inputs(ctx: Context, *, slices: bool) -> tuple[Hashable, ...]:
    """What a pass's class sync reads besides pools and policies (``skipping``): every
    DeviceClass (a hand-made one may collide or be deleted) and, for a DRA pool, the
    driver's ResourceSlices (device counts, WaitingForDriver)."""
    classes = tuple(sorted(_version(o) for o in api.list_classes(ctx.kube)))
    published = api.list_slices(ctx.kube, naming.DRIVER) if slices else []
    return classes, tuple(sorted(_version(o) for o in published))


def _version(obj: Obj) -> tuple[str, str]:
    return obj["metadata"]["name"], str(obj["metadata"].get("resourceVersion"))


declarer = naming.declarer


def pool_part(
    ctx: Context, synced: Synced, pool: str, seen: PoolObservation, verdict: Verdict
) -> tuple[Verdict, list[dict[str, Any]]]:
    """A DRA pool's verdict and ``status.deviceClasses``: its geometry classes with the
    devices its nodes publish; nodes that publish none leave the pool ``WaitingForDriver``."""
    nodes = sorted(seen.targets)
    published = api.list_slices(ctx.kube, naming.DRIVER)
    counted = slices.selected(published, nodes)
    listed = []
    for name in synced.classes_of(declarer("NodePoolGeometry", pool)):
        selects = synced.desired.classes[name].selects
        listed.append({"name": name, "selects": selects, "devices": counted.get(selects, 0)})
    found = synced.verdict(declarer("NodePoolGeometry", pool))
    if found is not None or verdict.state == "stalled":
        return found or verdict, listed
    waiting = slices.without_driver(published, nodes)
    if waiting:
        shown = ", ".join(waiting[:10]) + (
            f" and {len(waiting) - 10} more" if len(waiting) > 10 else ""
        )
        text = (
            f"node(s) {shown} publish no ResourceSlice of driver {naming.DRIVER}: is NVIDIA's DRA "
            "driver's kubelet plugin running there?"
        )
        return Verdict("progressing", WAITING_FOR_DRIVER, text, verdict.extra), listed
    return verdict, listed
