"""The Nodes' watch that wakes the daemons, passing on only changes a decision reads.

kopf ran this watch before: every Node event, a kubelet heartbeat included, went through its
whole machinery (a body, a diff, a memory per node, a log line) on the event loop — most of
the operator's CPU in a 1,000-node rollout, and per-node memory for ever. This list-then-watch
(``Informer``) keeps one integer per node, the hash of what a decision reads of it
(``fingerprint``), and tells its listeners only of a node that came, went, or changed that;
a heartbeat stops here, on the watch's thread. A re-list (the watch expired, the API server
restarted) also reports the nodes deleted meanwhile, which a watch alone would never say.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj
from tessera.adapters.node_cache import NodeCache

Listener = Callable[[str, Obj | None], None]
"""Told ``(name, node)`` of a node that changed, ``(name, None)`` of one that went."""


class NodeWatch:
    def __init__(
        self,
        kube: Kube,
        fingerprint: Callable[[Obj], Hashable],
        keep: Callable[[Obj], Obj] | None = None,
    ) -> None:
        self._fingerprint = fingerprint
        self._seen: dict[str, int] = {}
        self._listed: set[str] | None = None  # names of the re-list under way
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._informer = Informer(
            kube,
            "/api/v1/nodes",
            self._on_event,
            name="node-watch",
            on_synced=self._synced,
            on_listing=self._listing,
        )
        self.cache = NodeCache(keep, relist=self._informer.relist) if keep is not None else None
        """The nodes, kept as ``keep`` makes them, for passes to read (``snapshot``)."""

    def start(self) -> NodeWatch:
        self._informer.start()
        return self

    def stop(self) -> None:
        self._informer.stop()

    def following(self) -> bool:
        """Whether every Node change is seen now: the thread runs, and listed since its last
        error. Not so, a pass cannot tell that no Node changed: it must not be skipped."""
        return self._informer.is_alive() and self._informer.following.is_set()

    def snapshot(self) -> list[Obj] | None:
        """Every node as last seen, once this process's writes are in (``NodeCache``);
        ``None``: list them from the API server."""
        if self.cache is None or not self.following():
            return None
        return self.cache.snapshot()

    def settle(self) -> None:
        """Return once the watch has delivered this process's Node writes (at most 1 s)."""
        if self.cache is not None and self.following():
            self.cache.settle()

    def subscribe(self, listener: Listener) -> None:
        """``listener`` is called on the watch's thread."""
        with self._lock:
            self._listeners.append(listener)

    def _on_event(self, kind: str, obj: dict[str, Any]) -> None:
        if self.cache is not None:  # before anyone is told: a pass woken reads the cache
            self.cache.seen(kind, obj)  # (or, during a re-list, lists afresh: ``NodeCache``)
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            if self._seen.pop(name, None) is not None:
                self._tell(name, None)
            return
        if kind == "SYNC":
            if self._listed is None:
                self._listed = set()
            self._listed.add(name)
        digest = hash(self._fingerprint(obj))
        if self._seen.get(name) != digest:
            self._seen[name] = digest
            self._tell(name, obj)

    def _listing(self) -> None:
        """A list starts: names an earlier one gathered before it failed count for nothing."""
        self._listed = set()
        if self.cache is not None:
            self.cache.listing()

    def _synced(self) -> None:
        if self.cache is not None:
            self.cache.synced()
        listed, self._listed = self._listed or set(), None
        for name in set(self._seen) - listed:  # deleted while no watch ran
            del self._seen[name]
            self._tell(name, None)

    def _tell(self, name: str, obj: Obj | None) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(name, obj)
