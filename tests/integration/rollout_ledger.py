"""An outside observer of a pool's Nodes and a namespace's Pods, for the rollout stories.

``faults.Witness`` counts cordoned or NotReady nodes; the stories of issue 13
need what a cluster owner sees of Tessera itself, at every instant of the run:

* how many nodes Tessera holds out of scheduling — cordoned by it *or*
  carrying its taint (a cordon the test set as "the admin" counts only
  through Tessera's taint, since Tessera never lifts it);
* how many nodes are unschedulable at once, whoever made them so — cordoned by
  anyone (the admin too) or carrying Tessera's taint — what ``maxUnavailable``
  bounds (issue 34);
* the order in which nodes first carried a rollout state: which went first;
* anything Tessera writes on a node (its taint, its rollout state, a cordon)
  before the test opens the gate (an approval), as a list of violations;
* which pods were evicted (seen terminating or deleted), by uid;
* for each app given a budget (``budgets``: app label -> the PDB's minAvailable),
  the fewest of its replicas Ready at any instant after the start, and every
  instant it was below the budget — a PDB violated — as a list of violations.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c

from .helpers import eventually, running


@dataclass
class Ledger:
    kube: Kube
    pool: str
    namespace: str = ""
    admin_cordoned: frozenset[str] = frozenset()
    gate_open: threading.Event = field(default_factory=threading.Event)
    held: dict[str, bool] = field(default_factory=dict)
    worst: int = 0
    unschedulable: dict[str, bool] = field(default_factory=dict)
    worst_unschedulable: int = 0  # nodes out of scheduling at once, the admin's cordons too
    started: list[str] = field(default_factory=list)  # nodes in the order they got a state
    early: list[str] = field(default_factory=list)  # Tessera's writes before the gate opened
    evicted: dict[str, str] = field(default_factory=dict)  # uid -> pod name
    budgets: dict[str, int] = field(default_factory=dict)  # app -> minAvailable of its PDB
    fewest_ready: dict[str, int] = field(default_factory=dict)  # app -> lowest count seen
    below_budget: list[str] = field(default_factory=list)  # instants a PDB was violated
    pods: dict[str, tuple[str, bool]] = field(default_factory=dict)  # uid -> (app, Ready)
    _armed: bool = False
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
        with self._lock:  # counting starts from the listed state, not from the list's order
            self._armed = True
            self.fewest_ready = {app: self._ready(app) for app in self.budgets}
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
        unschedulable = bool(node["spec"].get("unschedulable"))
        cordoned = unschedulable and name not in self.admin_cordoned
        state = (meta.get("annotations") or {}).get(c.NODE_STATE_ANNOTATION)
        with self._lock:
            if kind == "DELETED":
                self.held.pop(name, None)
                self.unschedulable.pop(name, None)
                return
            self.held[name] = tainted or cordoned
            self.worst = max(self.worst, sum(self.held.values()))
            self.unschedulable[name] = unschedulable or tainted
            self.worst_unschedulable = max(
                self.worst_unschedulable, sum(self.unschedulable.values())
            )
            if state and name not in self.started:
                self.started.append(name)
            if not self.gate_open.is_set() and (tainted or cordoned or state):
                self.early.append(f"{name}: tainted={tainted} cordoned={cordoned} state={state}")

    def _pod(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        uid, app = meta["uid"], (meta.get("labels") or {}).get("app", "")
        gone = kind == "DELETED" or bool(meta.get("deletionTimestamp"))
        with self._lock:
            if gone:
                self.evicted.setdefault(uid, meta["name"])
                self.pods.pop(uid, None)
            else:
                self.pods[uid] = (app, running(pod))
            if self._armed and app in self.budgets:
                ready = self._ready(app)
                self.fewest_ready[app] = min(self.fewest_ready[app], ready)
                if ready < self.budgets[app]:
                    self.below_budget.append(f"{app}: {ready} Ready after {kind} {meta['name']}")

    def _ready(self, app: str) -> int:
        """Replicas of ``app`` Running and Ready, not terminating: what its PDB counts."""
        return sum(1 for owner, ready in self.pods.values() if owner == app and ready)
