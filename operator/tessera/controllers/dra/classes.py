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
from typing import Any

from pydantic import ValidationError

from tessera.adapters import dra as api
from tessera.adapters.kube import ApiError, Obj
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.controllers import skeleton
from tessera.controllers.dra import pool as dra_pool
from tessera.controllers.runtime import Context, custom_path
from tessera.domain import dra
from tessera.domain.base.conditions import Verdict
from tessera.domain.base.failures import Failure
from tessera.domain.cluster.objects import PoolObservation
from tessera.domain.dra import naming, verdicts
from tessera.domain.dra.verdicts import ClassesSynced

log = logging.getLogger("tessera.dra")
ATTEMPTS = 5
WAITING_FOR_DRIVER = verdicts.WAITING_FOR_DRIVER
_LOCK = threading.Lock()


def sync(ctx: Context, nodes: Iterable[Obj], *, without: str = "") -> ClassesSynced:
    """Make the cluster's Tessera DeviceClasses the desired set; ``without`` (``Kind/name``)
    leaves out an object being deleted (its finalizer calls this). An API error is returned
    in ``ClassesSynced.error``, never raised: only the objects whose classes are involved report it
    (``verdicts.failure_for``), so one refused class write fails no unrelated pass."""
    labels = [(n["metadata"].get("labels") or {}) for n in nodes]
    desired, owners = dra.DesiredClasses(), frozenset[str]()
    with _LOCK:
        try:
            for _ in range(ATTEMPTS):
                pools, policies, unparsed = _declarations(ctx, labels, without)
                desired = dra.holding(dra.desired_classes(pools, policies), unparsed)
                observed = api.list_classes(ctx.kube)
                owners = frozenset(d for o in observed if dra.owned(o) for d in dra.declarers(o))
                changes = dra.diff(desired, observed)
                try:
                    dropped = _apply(ctx, changes, observed)
                except ApiError as err:
                    if not err.conflict:
                        raise
                    log.info(
                        "DeviceClasses changed while Tessera wrote them (%s); re-planning", err
                    )
                    continue
                return ClassesSynced(
                    desired, changes.conflicts, dropped, changes.writes, owners=owners
                )
            raise ApiError(409, "Conflict", "DeviceClasses kept changing while Tessera wrote them")
        except ApiError as err:
            log.warning("DeviceClasses not synced: %s", err)
            return ClassesSynced(desired, owners=owners, error=Failure(err.status, str(err)))


def _declarations(
    ctx: Context, labels: list[Mapping[str, str]], without: str
) -> tuple[dict[str, dra.PoolInput], dict[str, SharingPolicySpec], list[str]]:
    unparsed: list[str] = []
    pools: dict[str, dra.PoolInput] = {}
    for obj in ctx.kube.list(custom_path("nodepoolgeometries")):
        name = obj["metadata"]["name"]
        if _gone(obj, naming.declarer("NodePoolGeometry", name), without):
            continue
        try:
            spec = NodePoolGeometrySpec.model_validate(obj.get("spec") or {})
        except ValidationError:  # the pool reports InvalidSpec; its classes stay as they are
            unparsed.append(naming.declarer("NodePoolGeometry", name))
            continue
        pools[name] = dra.pool_input(spec, labels)
    policies: dict[str, SharingPolicySpec] = {}
    for obj in ctx.kube.list(custom_path("sharingpolicies")):
        name = obj["metadata"]["name"]
        if _gone(obj, naming.declarer("SharingPolicy", name), without):
            continue
        try:
            policies[name] = SharingPolicySpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            unparsed.append(naming.declarer("SharingPolicy", name))
    return pools, policies, unparsed


def _gone(obj: Obj, who: str, without: str) -> bool:
    return who == without or bool(obj["metadata"].get("deletionTimestamp"))


def _apply(ctx: Context, changes: dra.ClassChanges, observed: list[Obj]) -> dict[str, str]:
    """Creates and updates, then deletes; a dropped field is noted per class."""
    dropped: dict[str, str] = {}
    current = {o["metadata"]["name"]: o for o in observed}
    for want in changes.create:
        try:
            stored = api.create_class(ctx.kube, want.manifest())
        except ApiError as err:
            if err.not_found:  # the collection itself is missing: no DRA API on this server
                raise ApiError(
                    404,
                    "NotFound",
                    f"cannot create DeviceClass {want.name}: "
                    f"{api.DEVICECLASSES} is not served ({err.message}); DRA pools "
                    "need Kubernetes 1.34 or newer (resource.k8s.io/v1)",
                ) from None
            raise
        log.info("DeviceClass %s created for %s", want.name, ",".join(want.declared_by))
        _note(dropped, want, stored)
    for want, version in changes.update:
        obj = current.get(want.name)
        if obj is None or str(obj["metadata"].get("resourceVersion")) != version:
            raise ApiError(409, "Conflict", f"DeviceClass {want.name} changed since it was read")
        try:
            stored = api.replace_class(ctx.kube, obj, want.metadata(), want.spec())
        except ApiError as err:
            if err.not_found:  # deleted since it was read: a race like any other, re-plan
                raise ApiError(409, "Conflict", f"DeviceClass {want.name} is gone") from None
            raise
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
    driver's ResourceSlices (device counts, WaitingForDriver; the pass observes the same
    list: ``dra_pool.one_slice_list``)."""
    classes = tuple(sorted(_version(o) for o in api.list_classes(ctx.kube)))
    published = dra_pool.slices(ctx) if slices else []
    return classes, tuple(sorted(_version(o) for o in published))


def _version(obj: Obj) -> tuple[str, str]:
    return obj["metadata"]["name"], str(obj["metadata"].get("resourceVersion"))


declarer = naming.declarer
holds_deletion = verdicts.holds_deletion


def report(synced: ClassesSynced, who: str, *, on_dra: bool) -> bool:
    """Note the sync's failure for this pass when it concerns ``who``
    (``verdicts.failure_for``); True when it did."""
    found = verdicts.failure_for(synced, who, on_dra=on_dra)
    if found is not None:
        skeleton.failed(found)
    return found is not None


def pool_part(
    synced: ClassesSynced, pool: str, seen: PoolObservation, verdict: Verdict, published: list[Obj]
) -> tuple[Verdict, list[dict[str, Any]]]:
    """A DRA pool's verdict and ``status.deviceClasses`` (``domain.dra.verdicts``), from the
    ResourceSlices the pass listed (``dra_pool.DraObserved.slices``)."""
    nodes = sorted(seen.targets)
    listed = verdicts.pool_classes(synced, pool, published, nodes)
    return verdicts.pool_verdict(synced, pool, published, nodes, verdict), listed
