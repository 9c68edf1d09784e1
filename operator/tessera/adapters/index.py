"""A watch-fed, in-memory projection of one resource, grouped for lookups (a shared informer).

The rollout engine ranks and pre-checks the nodes still waiting for their turn
by the pods on them, and it must not pay one API round trip per waiting node
on every pass to do that. This index keeps a small projection of each object
(the controller decides what: a ``PodView``), grouped by a key (the node),
updated from a watch. It is a cache and may lag the API server by a watch
event: callers use it only where a slightly old answer is harmless, and list
fresh where it is not (the recount before a layout change).

A re-list (the watch expired, the API server restarted) is built aside and
swapped in whole once complete, so a reader never sees a half-empty cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube

T = TypeVar("T")
Project = Callable[[dict[str, Any]], tuple[str, T] | None]
"""An object → (its group, what to keep of it), or None to keep nothing."""

Groups = dict[str, dict[str, T]]  # group → object key → projection
Listener = Callable[[T | None, T | None], None]
"""Told of each watched change as (before, after) projections; None: absent from the index."""


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class Index(Generic[T]):
    def __init__(
        self,
        kube: Kube,
        path: str,
        project: Project[T],
        *,
        name: str,
        field_selector: str | None = None,
    ) -> None:
        self._project = project
        self._lock = threading.Lock()
        self._live: Groups[T] = {}
        self._where: dict[str, str] = {}  # object key → its group in _live
        self._building: Groups[T] | None = None
        self._listeners: list[Listener[T]] = []
        self._informer = Informer(
            kube,
            path,
            self._on_event,
            name=name,
            field_selector=field_selector,
            on_synced=self._swap,
        )

    def start(self) -> Index[T]:
        self._informer.start()
        return self

    def stop(self) -> None:
        self._informer.stop()

    @property
    def synced(self) -> bool:
        return self._informer.synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self._informer.synced.wait(timeout)

    def subscribe(self, listener: Listener[T]) -> None:
        """Call ``listener`` on the informer's thread for every change a watch brings that
        alters an object's projection (not for re-lists): a pod that left a node, say."""
        self._listeners.append(listener)

    def get(self, groups: Iterable[str]) -> dict[str, list[T]] | None:
        """What the index holds for each group, or None before the first list completes."""
        if not self.synced:
            return None
        with self._lock:
            return {g: list(self._live.get(g, {}).values()) for g in groups}

    # -- the informer's thread -----------------------------------------------------------------

    def _on_event(self, kind: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        kept = None if kind == "DELETED" else self._project(obj)
        with self._lock:
            if kind == "SYNC":
                if self._building is None:
                    self._building = {}
                if kept is not None:
                    self._building.setdefault(kept[0], {})[key] = kept[1]
                return
            old = self._where.pop(key, None)
            before = self._live.get(old, {}).pop(key, None) if old is not None else None
            if kept is not None:
                self._live.setdefault(kept[0], {})[key] = kept[1]
                self._where[key] = kept[0]
        after = kept[1] if kept is not None else None
        if before != after:
            for listener in self._listeners:
                listener(before, after)

    def _swap(self) -> None:
        with self._lock:
            self._live = self._building or {}
            self._building = None
            self._where = {k: g for g, objs in self._live.items() for k in objs}
