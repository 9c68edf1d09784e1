"""kopf registration: every trigger becomes one wake-up of one idempotent reconcile.

No decision is made here. Each custom object gets a kopf daemon that runs
its controller's ``reconcile`` whenever something wakes it — a change to the
object, a Node/Namespace/ResourceQuota change that matters to it — or when
the resync interval passes. Wake-ups coalesce: a burst of a thousand Node
events costs one reconcile, and two reconciles of one object never overlap.
Deletion runs the controller's ``finalize`` behind Tessera's finalizer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from tessera.adapters.kube import ApiError
from tessera.api import constants as c
from tessera.controllers import nodepoolgeometry, sharingpolicy, tenantquota
from tessera.controllers.runtime import Context, Result

log = logging.getLogger("tessera.handlers")
RETRY_SECONDS = 5.0  # after a failed pass


def transient(err: ApiError) -> bool:
    """The API server is away (restart, overload) or the object moved under us (409)."""
    return err.status in (0, 409, 429) or err.status >= 500


@dataclass(frozen=True)
class Controller:
    plural: str
    reconcile: Callable[[Context, str], Result]
    finalize: Callable[[Context, str], bool]  # True once nothing of the object is left


CONTROLLERS: tuple[Controller, ...] = (
    Controller(nodepoolgeometry.PLURAL, nodepoolgeometry.reconcile, nodepoolgeometry.finalize),
    Controller(sharingpolicy.PLURAL, sharingpolicy.reconcile, sharingpolicy.finalize),
    Controller(tenantquota.PLURAL, tenantquota.reconcile, tenantquota.finalize),
)
NODE_WATCHERS = (nodepoolgeometry.PLURAL, sharingpolicy.PLURAL)


class Wakeups:
    """One asyncio.Event per object: triggers set it, the object's daemon waits on it."""

    def __init__(self) -> None:
        self._events: dict[tuple[str, str], asyncio.Event] = {}

    def event(self, plural: str, name: str) -> asyncio.Event:
        return self._events.setdefault((plural, name), asyncio.Event())

    def wake(self, plural: str, name: str) -> None:
        self.event(plural, name).set()

    def wake_all(self, plural: str) -> None:
        for (kind, _), event in self._events.items():
            if kind == plural:
                event.set()

    def forget(self, plural: str, name: str) -> None:
        self._events.pop((plural, name), None)


def build_registry(ctx: Context) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    wakeups = Wakeups()
    for controller in CONTROLLERS:
        _register_kind(registry, ctx, wakeups, controller)
    _register_watches(registry, wakeups)
    _register_sharing_maps(registry, ctx, wakeups)

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

    return registry


def _register_kind(
    registry: kopf.OperatorRegistry, ctx: Context, wakeups: Wakeups, controller: Controller
) -> None:
    plural = controller.plural

    @kopf.daemon(
        c.GROUP, c.VERSION, plural, registry=registry, cancellation_timeout=10, id="reconcile"
    )
    async def run(name: str, stopped: kopf.DaemonStopped, **_: Any) -> None:
        wake = wakeups.event(plural, name)
        try:
            while not stopped:
                wake.clear()
                try:
                    result = await asyncio.to_thread(controller.reconcile, ctx, name)
                    delay = result.requeue_after or ctx.settings.resync_seconds
                except ApiError as err:  # the message says it all: no stack for an answer
                    level = logging.WARNING if transient(err) else logging.ERROR
                    log.log(level, "%s/%s: reconcile failed: %s; retrying", plural, name, err)
                    delay = RETRY_SECONDS
                except Exception:
                    log.exception("%s/%s: reconcile failed; retrying", plural, name)
                    delay = RETRY_SECONDS
                waiter = asyncio.ensure_future(wake.wait())
                try:
                    await asyncio.wait({waiter}, timeout=delay)
                finally:
                    waiter.cancel()
        finally:
            wakeups.forget(plural, name)

    @kopf.on.event(c.GROUP, c.VERSION, plural, registry=registry, id="wake")
    def changed(name: str, type: str | None, **_: Any) -> None:
        if type in ("ADDED", "MODIFIED"):
            wakeups.wake(plural, name)

    @kopf.on.delete(c.GROUP, c.VERSION, plural, registry=registry, id="finalize")
    async def delete(name: str, **_: Any) -> None:
        if not await asyncio.to_thread(controller.finalize, ctx, name):
            raise kopf.TemporaryError("backing out in-flight nodes", delay=2)
        for other in CONTROLLERS:  # e.g. another tenant may now own a namespace
            wakeups.wake_all(other.plural)


def node_fingerprint(body: Mapping[str, Any]) -> tuple[object, ...]:
    """The parts of a Node that Tessera's decisions read; heartbeats do not change it."""
    meta, spec, status = body.get("metadata", {}), body.get("spec", {}), body.get("status", {})
    ready = [x.get("status") for x in status.get("conditions", []) if x.get("type") == "Ready"]
    return (
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted((meta.get("annotations") or {}).items())),
        bool(spec.get("unschedulable")),
        repr(spec.get("taints")),
        tuple(sorted((status.get("allocatable") or {}).items())),
        tuple(ready),
    )


def _register_watches(registry: kopf.OperatorRegistry, wakeups: Wakeups) -> None:
    seen: dict[str, tuple[object, ...]] = {}

    @kopf.on.event("", "v1", "nodes", registry=registry)
    def node_changed(name: str, type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        if type == "DELETED":
            seen.pop(name, None)
        else:
            fingerprint = node_fingerprint(body)
            if seen.get(name) == fingerprint:
                return
            seen[name] = fingerprint
        for plural in NODE_WATCHERS:
            wakeups.wake_all(plural)

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
    """A hand edit of the device-plugin or HAMi ConfigMaps wakes every SharingPolicy (drift)."""
    hami = ctx.settings.hami_namespace
    watched = {
        ctx.settings.device_plugin_configmap,
        (hami, c.HAMI_NVIDIA_CONFIGMAP_NAME),
        (hami, c.HAMI_ASCEND_CONFIGMAP_NAME),
    }

    @kopf.on.event("", "v1", "configmaps", registry=registry)
    def sharing_map_changed(name: str, namespace: str | None, **_: Any) -> None:
        if (namespace or "", name) in watched:
            wakeups.wake_all(sharingpolicy.PLURAL)
