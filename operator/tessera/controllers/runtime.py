"""What every controller is handed at start-up: the API adapter, a clock, settings.

Wiring is built once in ``tessera run`` and injected, so a controller never
reads the environment, the wall clock or a global client on its own — tests
build a Context around the real API server and a clock they control.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from tessera.adapters.events import EventRecorder, Ref
from tessera.adapters.index import Index
from tessera.adapters.kube import Kube, path_of
from tessera.adapters.node_watch import NodeWatch
from tessera.adapters.sharing import Shared
from tessera.api import constants as c
from tessera.controllers.skipping import FULL_PASS_RESYNCS, NodeChanges, Passes
from tessera.domain.base import failures
from tessera.domain.base.idle import slim_node
from tessera.domain.cluster import objects as cluster
from tessera.domain.quota.settling import Record
from tessera.domain.rollout import PodView

STOPPING: ContextVar[Callable[[], bool]] = ContextVar("stopping", default=lambda: False)
"""Whether the pass running in this context should stop starting new work (kopf is stopping
or pausing its daemon). The daemon sets it; ``asyncio.to_thread`` carries it into the pass."""


def stopping() -> bool:
    return STOPPING.get()()


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Settings:
    """Operator settings (flags of ``tessera run``); defaults match the GPU Operator's."""

    resync_seconds: float = 60.0
    mig_configmap: tuple[str, str] = (c.MIG_PARTED_CONFIGMAP_NAMESPACE, c.MIG_PARTED_CONFIGMAP_NAME)
    device_plugin_configmap: tuple[str, str] = (
        c.DEVICE_PLUGIN_CONFIGMAP_NAMESPACE,
        c.DEVICE_PLUGIN_CONFIGMAP_NAME,
    )
    vnpu_configmap: tuple[str, str] = (c.VNPU_CONFIGMAP_NAMESPACE, c.VNPU_CONFIGMAP_NAME)
    vgpu_configmap: tuple[str, str] = (c.VGPU_CONFIGMAP_NAMESPACE, c.VGPU_CONFIGMAP_NAME)
    hami_namespace: str = c.HAMI_NAMESPACE
    retry_base_seconds: float = failures.BACKOFF_BASE_S
    retry_cap_seconds: float = failures.BACKOFF_CAP_S
    """A failing object's passes back off from ``retry_base_seconds`` doubling to this."""


@dataclass(frozen=True)
class Result:
    """When to look again (None: at the next resync or trigger)."""

    requeue_after: float | None = None
    starved: bool = False
    """A node waits for room for its drain's pods: wake the object on any node or pod change."""
    failures: int = 0
    """Failed passes in a row, this one included (0: it succeeded): the runner backs off."""


@dataclass(frozen=True)
class Streak:
    """An object's failed passes in a row: how many, and when the first of them failed."""

    tries: int
    since: datetime


class Streaks:
    """Failed passes in a row, per object: the count behind backoff and Stalled-after-N."""

    def __init__(self) -> None:
        self._streaks: dict[tuple[str, str], Streak] = {}
        self._lock = threading.Lock()

    def failed(self, plural: str, name: str, now: datetime) -> Streak:
        """Count one more failed pass of the object, at ``now``; the streak, this one included."""
        with self._lock:
            old = self._streaks.get((plural, name))
            streak = Streak(old.tries + 1, old.since) if old else Streak(1, now)
            self._streaks[(plural, name)] = streak
            return streak

    def succeeded(self, plural: str, name: str) -> None:
        """A pass succeeded (or the object is gone): the next failure starts afresh."""
        with self._lock:
            self._streaks.pop((plural, name), None)


@dataclass
class Context:
    kube: Kube
    settings: Settings = field(default_factory=Settings)
    clock: Callable[[], datetime] = utcnow
    pod_index: Index[PodView] | None = None
    """Pods by node, watch-fed; None where nothing keeps one (then pods are listed)."""
    node_watch: NodeWatch | None = None
    """The Nodes' watch that wakes the daemons (``tessera run``); None: kopf's watch does."""
    node_changes: NodeChanges | None = None
    """Node changes counted by the watch that wakes the daemons; None: no pass is skipped."""
    events: EventRecorder = field(init=False)
    streaks: Streaks = field(default_factory=Streaks)
    passes: Passes = field(init=False)
    quota_activity: dict[str, Record] = field(default_factory=dict)
    """What each TenantQuota's previous pass saw its namespaces use (``quota.settling``). Lost
    on restart, and possibly stale (a tenant deleted and re-created): either only delays moves."""

    def __post_init__(self) -> None:
        self.events = EventRecorder(self.kube)
        full_every = FULL_PASS_RESYNCS * self.settings.resync_seconds
        watch = self.node_watch
        following = watch.following if watch is not None else (lambda: True)
        settle = watch.settle if watch is not None else (lambda: None)
        self.passes = Passes(self.node_changes, full_every, following=following, settle=settle)


def custom_path(plural: str, name: str = "") -> str:
    return path_of(f"{c.GROUP}/{c.VERSION}", plural, name)


def ref_of(obj: dict[str, Any]) -> Ref:
    meta = obj["metadata"]
    return Ref(
        obj.get("apiVersion", c.API_VERSION),
        obj.get("kind", ""),
        meta["name"],
        meta.get("uid", ""),
        meta.get("namespace", ""),
    )


def write_status(ctx: Context, plural: str, obj: dict[str, Any], status: dict[str, Any]) -> bool:
    """Patch ``status`` only when it differs from what the object already says."""
    if obj.get("status") == status:
        return False
    ctx.kube.patch(
        custom_path(plural, obj["metadata"]["name"]) + "/status",
        [{"op": "add", "path": "/status", "value": status}],  # add replaces: exact, no merging
        kind="json",
    )
    return True


def spec_error(err: ValidationError) -> str:
    """The first validation error, as ``spec.<field>: <why>``."""
    first = err.errors()[0]
    return "spec." + ".".join(str(p) for p in first["loc"]) + f": {first['msg']}"


def list_nodes(ctx: Context) -> list[dict[str, Any]]:
    """Every Node, slim (``idle.slim_node``; shared: read-only): from the node watch's cache
    once this process's own writes are in it (``NodeCache``), else listed, one page of full
    objects in memory at a time."""
    cached = ctx.node_watch.snapshot() if ctx.node_watch is not None else None
    if cached is not None:
        return cached
    return [slim_node(node) for page in ctx.kube.pages("/api/v1/nodes") for node in page["items"]]


def pod_index(kube: Kube) -> Index[PodView]:
    """Every bound pod, as the rollout engine sees it, grouped by node."""

    shared = Shared()

    def project(pod: dict[str, Any]) -> tuple[str, PodView] | None:
        node = (pod.get("spec") or {}).get("nodeName")
        return (shared.text(node), slim(cluster.pod_view(pod), shared)) if node else None

    return Index(kube, "/api/v1/pods", project, name="pod-index", field_selector="spec.nodeName!=")


def slim(view: PodView, shared: Shared) -> PodView:
    """The view with what the pods of one template have in common shared (``Shared``)."""
    return replace(
        view,
        namespace=shared.text(view.namespace),
        node=shared.text(view.node),
        labels=shared.mapping(view.labels),
        owner_kind=shared.value(view.owner_kind),
        phase=shared.value(view.phase),
        requests=shared.mapping(view.requests),
        node_selector=shared.mapping(view.node_selector),
        tolerations=shared.value(view.tolerations),
    )
