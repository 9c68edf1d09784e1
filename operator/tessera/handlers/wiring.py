"""kopf registration: every trigger becomes one wake-up of one idempotent reconcile.

No decision is made here. Each custom object gets a kopf daemon that runs the
per-object runner (``tessera.controllers.loop``): its controller's
``reconcile`` whenever something wakes it — a change to the object, a
Node/Namespace/ResourceQuota change that matters to it — or when the resync
interval (or a failed pass's backoff) passes. Wake-ups coalesce: a burst of a
thousand Node events costs one reconcile, and two reconciles of one object never
overlap. Deletion runs the controller's ``finalize`` behind Tessera's finalizer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from tessera.api import constants as c
from tessera.api.v1alpha1.scheduler import HamiScheduler, VolcanoScheduler
from tessera.controllers import loop, nodepoolgeometry, sharingpolicy, tenantquota
from tessera.controllers.loop import Controller, Waiting, guarded
from tessera.controllers.runtime import Context
from tessera.controllers.writer_lease import WriterLease
from tessera.domain.rollout import PodView
from tessera.domain.schedulers.volcano import geometries as volcano_geometries
from tessera.handlers import contract_watch
from tessera.handlers.wakeups import (
    NodeWakeups,
    Wakeups,
    frees_room,
    object_fingerprint,
    pod_nodes,
)

CONTROLLERS: tuple[Controller, ...] = (
    Controller(
        nodepoolgeometry.KIND,
        nodepoolgeometry.PLURAL,
        nodepoolgeometry.reconcile,
        nodepoolgeometry.finalize,
    ),
    Controller(
        sharingpolicy.KIND, sharingpolicy.PLURAL, sharingpolicy.reconcile, sharingpolicy.finalize
    ),
    Controller(tenantquota.KIND, tenantquota.PLURAL, tenantquota.reconcile, tenantquota.finalize),
)


def build_registry(ctx: Context, *, lease: WriterLease | None = None) -> kopf.OperatorRegistry:
    """``lease``: with peering, every pass first holds this writer Lease (``domain.base.lease``)."""
    registry = kopf.OperatorRegistry()
    wakeups = Wakeups()
    for controller in CONTROLLERS:
        _register_kind(registry, ctx, wakeups, controller, lease)
    _register_watches(registry, ctx, wakeups)
    _register_sharing_maps(registry, ctx, wakeups)
    contract_watch.register(registry, wakeups)  # pod contracts edited or deleted by hand

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # A custom registry gets none of kopf's default login handlers.
        info: kopf.ConnectionInfo | None = kopf.login_with_service_account(
            **kwargs
        ) or kopf.login_with_kubeconfig(**kwargs)
        return info

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.finalizer = c.FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=c.GROUP, key="last-handled-configuration"
        )
        settings.posting.level = logging.WARNING
        settings.watching.server_timeout = 300
        settings.execution.max_workers = 8
        # kopf waits this long after an object's event for more of the same object before
        # handling it; node events only wake a daemon, so 0.1 s would only add latency
        # to every step of a rollout.
        settings.queueing.batch_window = 0.02

    return registry


def _register_kind(
    registry: kopf.OperatorRegistry,
    ctx: Context,
    wakeups: Wakeups,
    controller: Controller,
    lease: WriterLease | None,
) -> None:
    plural = controller.plural

    @kopf.daemon(
        c.GROUP,
        c.VERSION,
        plural,
        registry=registry,
        cancellation_timeout=10,
        id="reconcile",
    )
    async def run(name: str, stopped: kopf.DaemonStopped, **_: Any) -> None:
        await loop.run(ctx, wakeups, controller, name, lambda: bool(stopped), lease)

    seen: dict[str, tuple[object, ...]] = {}

    @kopf.on.event(c.GROUP, c.VERSION, plural, registry=registry, id="wake")
    def changed(name: str, type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        if type == "DELETED":
            seen.pop(name, None)
            return
        fingerprint = object_fingerprint(body)
        if type in ("ADDED", "MODIFIED", None) and seen.get(name) != fingerprint:
            seen[name] = fingerprint
            wakeups.wake(plural, name)

    @kopf.on.delete(c.GROUP, c.VERSION, plural, registry=registry, id="finalize")
    async def delete(name: str, **_: Any) -> None:
        finalized = await asyncio.to_thread(guarded, lease, lambda: controller.finalize(ctx, name))
        if isinstance(finalized, Waiting):
            raise kopf.TemporaryError(f"writer lease {finalized.reason}", delay=loop.LEASE_RETRY_S)
        if not finalized:
            raise kopf.TemporaryError("backing out in-flight nodes", delay=2)
        for other in CONTROLLERS:  # e.g. another tenant may now own a namespace
            wakeups.wake_all(other.plural)


def _register_watches(registry: kopf.OperatorRegistry, ctx: Context, wakeups: Wakeups) -> None:
    nodes = NodeWakeups(wakeups, ctx.node_changes.bump if ctx.node_changes else lambda: None)

    @kopf.on.startup(registry=registry)
    async def follow_pods(**_: Any) -> None:
        """The pod index's watch wakes the rollout holding a node when its pods change."""
        if ctx.pod_index is None:
            return
        loop = asyncio.get_running_loop()

        def changed(before: PodView | None, after: PodView | None) -> None:  # informer thread
            try:
                loop.call_soon_threadsafe(
                    nodes.pods_changed, pod_nodes(before, after), frees_room(before, after)
                )
            except RuntimeError:  # the loop has closed: the operator is stopping
                return

        ctx.pod_index.subscribe(changed)

    @kopf.on.event(c.GROUP, c.VERSION, nodepoolgeometry.PLURAL, registry=registry, id="selector")
    def pool_changed(name: str, type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        nodes.pool_changed(name, None if type == "DELETED" else body.get("spec") or {})

    if ctx.node_watch is not None:  # heartbeats stop on its thread, not on the event loop
        node_watch = ctx.node_watch

        @kopf.on.startup(registry=registry)
        async def follow_nodes(**_: Any) -> None:
            loop = asyncio.get_running_loop()

            def changed(name: str, body: Mapping[str, Any] | None) -> None:  # watch thread
                try:
                    loop.call_soon_threadsafe(nodes.node_changed, name, body)
                except RuntimeError:  # the loop has closed: the operator is stopping
                    return

            node_watch.subscribe(changed)
            node_watch.start()
    else:

        @kopf.on.event("", "v1", "nodes", registry=registry)
        def node_changed(name: str, type: str | None, body: Mapping[str, Any], **_: Any) -> None:
            nodes.node_changed(name, None if type == "DELETED" else body)

    @kopf.on.event("", "v1", "namespaces", registry=registry)
    def namespace_changed(**_: Any) -> None:
        wakeups.wake_all(tenantquota.PLURAL)

    @kopf.on.event(
        "",
        "v1",
        "resourcequotas",
        registry=registry,
        labels={c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE},
    )
    def quota_changed(labels: Mapping[str, str], **_: Any) -> None:
        tenant = labels.get(c.TENANT_QUOTA_LABEL)
        if tenant:
            wakeups.wake(tenantquota.PLURAL, tenant)


def _register_sharing_maps(registry: kopf.OperatorRegistry, ctx: Context, wakeups: Wakeups) -> None:
    """A hand edit of the device-plugin, HAMi or Volcano ConfigMaps, or a change of a scheduler
    Deployment, wakes every SharingPolicy (drift, versions, restarts)."""
    hami = ctx.settings.hami_namespace
    watched = {
        ctx.settings.device_plugin_configmap,
        (hami, c.HAMI_NVIDIA_CONFIGMAP_NAME),
        (hami, c.HAMI_ASCEND_CONFIGMAP_NAME),
        (hami, c.HAMI_SCHEDULER_CONFIGMAP_NAME),
    }

    # Volcano's conf and Tessera's geometries map, in any namespace (the Role grants these
    # names only): a hand edit, or a Volcano installed after the policy, wakes the policies.
    volcano = {VolcanoScheduler().config_map.name, volcano_geometries.NAME}

    @kopf.on.event("", "v1", "configmaps", registry=registry)
    def sharing_map_changed(name: str, namespace: str | None, **_: Any) -> None:
        if (namespace or "", name) in watched or name in volcano:
            wakeups.wake_all(sharingpolicy.PLURAL)

    # The scheduler Deployments (the Role grants these names only): a new image tag is a new
    # version, and the end of a rollout ends a pending restart.
    schedulers = {HamiScheduler().deployment.name, VolcanoScheduler().deployment.name}

    @kopf.on.event("apps", "v1", "deployments", registry=registry)
    def scheduler_changed(name: str, **_: Any) -> None:
        if name in schedulers:
            wakeups.wake_all(sharingpolicy.PLURAL)
