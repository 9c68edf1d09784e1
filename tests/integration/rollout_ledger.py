"""An outside observer of a pool's Nodes and a namespace's Pods, for the rollout stories.

``faults.Witness`` counts cordoned or NotReady nodes; the stories of issue 13
need what a cluster owner sees of Tessera itself, at every instant of the run:

* how many nodes Tessera holds out of scheduling — cordoned by it *or*
  carrying its taint (a cordon the test set as "the admin" counts only
  through Tessera's taint, since Tessera never lifts it);
* anything Tessera writes on a node (its taint, its rollout state, a cordon)
  before the test opens the gate (an approval), as a list of violations;
* which pods were evicted (seen terminating or deleted), by uid.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from .helpers import eventually


@dataclass
class Ledger:
    kube: Kube
    pool: str
    namespace: str = ""
    admin_cordoned: frozenset[str] = frozenset()
    gate_open: threading.Event = field(default_factory=threading.Event)
    held: dict[str, bool] = field(default_factory=dict)
    worst: int = 0
    early: list[str] = field(default_factory=list)  # Tessera's writes before the gate opened
    evicted: dict[str, str] = field(default_factory=dict)  # uid -> pod name
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _informers: list[Informer] = field(default_factory=list)

    def __enter__(self) -> Ledger:
        self._informers.append(Informer(self.kube, "/api/v1/nodes", self._node, name="ledger"))
        if self.namespace:
            pods = path_of("v1", "pods", namespace=self.namespace)
            self._informers.append(Informer(self.kube, pods, self._pod, name="ledger-pods"))
        for informer in self._informers:
            informer.start()
        for informer in self._informers:
            eventually(informer.synced.is_set, 30, f"{informer.name} synced")
        return self

    def __exit__(self, *_: object) -> None:
        for informer in self._informers:
            informer.stop()

    def _node(self, kind: str, node: Obj) -> None:
        meta = node["metadata"]
        if (meta.get("labels") or {}).get(c.POOL_LABEL) != self.pool:
            return
        name = meta["name"]
        tainted = any(
            t.get("key") == c.GEOMETRY_PENDING_TAINT for t in node["spec"].get("taints") or []
        )
        cordoned = bool(node["spec"].get("unschedulable")) and name not in self.admin_cordoned
        state = (meta.get("annotations") or {}).get(c.NODE_STATE_ANNOTATION)
        with self._lock:
            if kind == "DELETED":
                self.held.pop(name, None)
                return
            self.held[name] = tainted or cordoned
            self.worst = max(self.worst, sum(self.held.values()))
            if not self.gate_open.is_set() and (tainted or cordoned or state):
                self.early.append(f"{name}: tainted={tainted} cordoned={cordoned} state={state}")

    def _pod(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            with self._lock:
                self.evicted.setdefault(meta["uid"], meta["name"])
