"""What the simulated HAMi device plugins share: two informers and level-triggered syncs.

A plugin runs on the nodes it claims (``_runs_on``), keeps the config maps of HAMi's namespace
it reads (``_take_config``) and writes each node from them (``_sync``): each decides from its
own tables. No node is synced before the config maps have been listed once.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Self

from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c


class HamiPlugin:
    """A HAMi device plugin on every node it runs on, level-triggered from two informers."""

    def __init__(self, kube: Kube, name: str) -> None:
        self.kube = kube
        self._nodes: dict[str, Obj] = {}
        self._read = threading.Event()
        self._lock = threading.Lock()  # one node written at a time, from the latest configs
        self.informers = [
            Informer(
                kube,
                path_of("v1", "configmaps", namespace=c.HAMI_NAMESPACE),
                self._on_config,
                name=f"sim-{name}-config",
                on_synced=self._synced,
            ),
            Informer(kube, "/api/v1/nodes", self._on_node, name=f"sim-{name}-nodes"),
        ]

    def start(self) -> Self:
        for informer in self.informers:
            informer.start()
        return self

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    def _take_config(self, kind: str, cm: Obj) -> bool:
        """Keep (or drop, when DELETED) ``cm`` if the plugin reads it; False when it does not."""
        raise NotImplementedError

    def _runs_on(self, labels: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def _sync(self, node: Obj) -> None:
        raise NotImplementedError

    def _synced(self) -> None:
        self._read.set()  # no plugin registers before it has read its configs
        self._sync_all()

    def _on_config(self, kind: str, cm: Obj) -> None:
        with self._lock:
            if not self._take_config(kind, cm):
                return
        if self._read.is_set():
            self._sync_all()

    def _on_node(self, kind: str, node: Obj) -> None:
        name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
        with self._lock:
            if kind == "DELETED" or not self._runs_on(labels):
                self._nodes.pop(name, None)
                return
            self._nodes[name] = node
            if self._read.is_set():
                self._sync(node)

    def _sync_all(self) -> None:
        with self._lock:
            for node in list(self._nodes.values()):
                self._sync(node)
