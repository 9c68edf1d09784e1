"""List-then-watch in a background thread: for node agents, their simulations, and caches.

A simulated kubelet or MIG manager reacts to objects the way the real agent
does: it sees every object once at start (``SYNC``) and then every change.
When the watch expires it re-lists, so no event is lost across a restart of
the API server. Lists are paginated, so a cluster of 20,000 pods is never one
response held in memory at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from tessera.adapters.kube import ApiError, Kube

Handler = Callable[[str, dict[str, Any]], None]
log = logging.getLogger(__name__)


class Informer(threading.Thread):
    def __init__(
        self,
        kube: Kube,
        path: str,
        handler: Handler,
        *,
        name: str,
        field_selector: str | None = None,
        on_synced: Callable[[], None] = lambda: None,
        on_listing: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.kube = kube
        self.path = path
        self.field_selector = field_selector
        self.handler = handler
        self.on_synced = on_synced
        self.on_listing = on_listing  # a list starts: what an unfinished one gathered is void
        self.stopped = threading.Event()
        self.synced = threading.Event()  # the first list completed
        self.following = threading.Event()  # listed, and no error since: no change is missed
        self._relist = threading.Event()

    def stop(self) -> None:
        self.stopped.set()

    def relist(self) -> None:
        """List again soon: at the next event, or when the current watch ends (30 s at most)."""
        self._relist.set()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self._list_and_watch()
                continue  # the watch expired: re-list at once
            except ApiError as err:  # a refusal never heals by itself: say so where it shows
                level = logging.WARNING if err.status in (401, 403) else logging.DEBUG
                log.log(level, "%s: %s; re-listing", self.name, err)
            except Exception:  # anything else: this thread must live on, or changes go unseen
                log.exception("%s: list or watch failed; re-listing", self.name)
            self.following.clear()
            self.stopped.wait(0.5)  # back-off before re-listing after an error

    def _list_and_watch(self) -> None:
        self._relist.clear()
        self.on_listing()
        version = ""
        for page in self.kube.pages(self.path, field_selector=self.field_selector):
            version = version or str((page.get("metadata") or {}).get("resourceVersion", ""))
            for item in page.get("items") or []:
                self._handle("SYNC", item)
        self.on_synced()  # every listed object was handed over: the list is complete
        self.synced.set()
        self.following.set()
        self._watch(version)

    def _watch(self, version: str) -> None:
        while not self.stopped.is_set() and not self._relist.is_set():
            for kind, obj in self.kube.watch(
                self.path,
                resource_version=version,
                field_selector=self.field_selector,
                timeout_seconds=30,
            ):
                if self.stopped.is_set() or self._relist.is_set():
                    return
                if kind == "ERROR":
                    return  # resource version expired: re-list
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if kind != "BOOKMARK":
                    self._handle(kind, obj)

    def _handle(self, kind: str, obj: dict[str, Any]) -> None:
        try:
            self.handler(kind, obj)
        except Exception:  # a simulator bug must not kill the thread
            log.exception(
                "%s: handler failed on %s", self.name, obj.get("metadata", {}).get("name")
            )
