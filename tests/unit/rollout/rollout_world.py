"""An in-memory cluster the rollout engine can be run against, step by step.

It does what the real parties do, at the level the engine observes: the
Eviction API honours PDBs (429) and marks pods terminating; the kubelet removes
terminating pods after their grace period; a ReplicaSet recreates evicted pods
on a schedulable, untainted node; the MIG manager reacts to a *changed*
``nvidia.com/mig.config`` with pending → success/failed after a delay and sets
allocatable. Node state travels as the real annotation text, so every pass
exercises encode/decode. The world also records what the invariants need.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from builders.views import ALLOC
from tessera.api.constants import (
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    NODE_STATE_ANNOTATION,
)
from tessera.api.v1alpha1.common import LabelSelector
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.state import StateError, decode
from tessera.domain.rollout.views import GEOMETRY_PENDING, NodeView, PdbView, PodView, Taint


@dataclass
class SimNode:
    name: str
    labels: dict[str, str]
    alloc: dict[str, int]
    unschedulable: bool = False
    admin_cordoned: bool = False
    ready: bool = True
    taints: list[Taint] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    agent_job: tuple[str, int, bool] | None = None  # (config, ticks left, will fail)


@dataclass
class SimPod:
    pod: PodView
    grace: int = 1


class World:
    def __init__(self, rng: random.Random, now: datetime, fail_rate: float = 0.0) -> None:
        self.rng, self.now, self.fail_rate = rng, now, fail_rate
        self.nodes: dict[str, SimNode] = {}
        self.pods: dict[str, SimPod] = {}
        self.pdb_min: dict[str, tuple[str, int]] = {}  # pdb name -> (app label, minAvailable)
        self.accepted_evictions: Counter[str] = Counter()
        self.events: list[str] = []
        self.serial = 0
        self.failures_left: set[str] = set()

    # --- building -------------------------------------------------------------
    def add_node(self, name: str, config: str, *, cordoned: bool = False) -> None:
        labels = {MIG_CONFIG_LABEL: config, MIG_CONFIG_STATE_LABEL: "success"}
        self.nodes[name] = SimNode(name, labels, dict(ALLOC[config]), cordoned, cordoned)

    def add_pod(
        self,
        node: str,
        app: str,
        *,
        accel: bool = True,
        owner: str = "ReplicaSet",
        grace: int | None = None,
    ) -> None:
        self.serial += 1
        name = f"{app}-{self.serial}"
        pod = PodView(
            "ml", name, node, {"app": app}, owner, requests_accelerator=accel, uid=f"u{self.serial}"
        )
        self.pods[pod.key] = SimPod(pod, self.rng.randint(0, 3) if grace is None else grace)

    # --- observing ------------------------------------------------------------
    def view(self, name: str) -> NodeView:
        n = self.nodes[name]
        raw = n.annotations.get(NODE_STATE_ANNOTATION)
        try:
            st, err = decode(raw), ""
        except StateError as e:
            st, err = None, str(e)
        return NodeView(
            name,
            dict(n.labels),
            dict(n.annotations),
            n.unschedulable,
            n.ready,
            dict(n.alloc),
            tuple(n.taints),
            st,
            err,
        )

    def observe(self) -> tuple[list[NodeView], list[PodView], list[PdbView]]:
        pdbs = []
        for pdb_name, (app, minimum) in sorted(self.pdb_min.items()):
            healthy = sum(
                1
                for p in self.pods.values()
                if p.pod.labels.get("app") == app and p.pod.deletion_timestamp is None
            )
            sel = LabelSelector(match_labels={"app": app})
            pdbs.append(PdbView("ml", pdb_name, sel, max(0, healthy - minimum)))
        pods = [p.pod for p in sorted(self.pods.values(), key=lambda p: p.pod.key)]
        return [self.view(n) for n in sorted(self.nodes)], pods, pdbs

    # --- the other controllers --------------------------------------------------
    def tick(self, dt: timedelta) -> None:
        self.now += dt
        for key, sp in sorted(self.pods.items()):
            if sp.pod.deletion_timestamp is None:
                continue
            if sp.grace > 0:
                sp.grace -= 1
                continue
            del self.pods[key]
            if sp.pod.owner_kind == "ReplicaSet":
                self.reschedule(sp.pod)
        for n in sorted(self.nodes.values(), key=lambda n: n.name):
            self.agent(n)

    def reschedule(self, pod: PodView) -> None:
        free = [
            n.name
            for n in sorted(self.nodes.values(), key=lambda n: n.name)
            if not n.unschedulable and not n.taints
        ]
        if free:
            self.add_pod(self.rng.choice(free), pod.labels["app"], accel=pod.requests_accelerator)

    def agent(self, n: SimNode) -> None:
        if n.agent_job is None:
            return
        config, left, fails = n.agent_job
        if left > 0:
            n.agent_job = (config, left - 1, fails)
            return
        n.agent_job = None
        if fails or self.accel_pods_on(n.name):
            n.labels[MIG_CONFIG_STATE_LABEL] = "failed"
            self.events.append(f"agent {n.name}: {config} failed")
            return
        n.labels[MIG_CONFIG_STATE_LABEL] = "success"
        n.alloc = dict(ALLOC[config])

    # --- the API server ---------------------------------------------------------
    def apply(self, a: act.Action) -> None:
        n = self.nodes[a.node]
        match a:
            case act.SetNodeState() | act.ClearNodeState():
                for k, v in a.annotations.items():
                    if v is None:
                        n.annotations.pop(k, None)
                    else:
                        n.annotations[k] = v
            case act.Cordon():
                n.unschedulable = True
            case act.Uncordon():
                assert not n.admin_cordoned, f"uncordoned {n.name}, which an admin had cordoned"
                n.unschedulable = False
            case act.AddTaint(taint=t):
                if t not in n.taints:
                    n.taints.append(t)
            case act.RemoveTaint(taint=t):
                n.taints = [x for x in n.taints if x != t]
            case act.SetNodeLabels(labels=labels):
                self.set_labels(n, dict(labels))
            case act.Evict() | act.DeletePod():
                self.evict(a)

    def set_labels(self, n: SimNode, labels: dict[str, str | None]) -> None:
        before = n.labels.get(MIG_CONFIG_LABEL)
        for k, v in labels.items():
            if v is None:
                n.labels.pop(k, None)
            else:
                n.labels[k] = v
        after = n.labels.get(MIG_CONFIG_LABEL)
        if after is not None and after != before:  # the MIG manager acts on changes only
            fails = n.name in self.failures_left
            self.failures_left.discard(n.name)
            n.labels[MIG_CONFIG_STATE_LABEL] = "pending"
            n.agent_job = (after, self.rng.randint(1, 6), fails)

    def evict(self, a: act.Evict | act.DeletePod) -> None:
        key = f"ml/{a.name}@{a.uid}" if a.uid else f"ml/{a.name}"
        sp = self.pods.get(key)
        if sp is None:
            return  # 404 or 409: gone or replaced
        assert sp.pod.deletion_timestamp is None, f"{key} evicted twice"
        if isinstance(a, act.Evict):
            for pdb_name, (app, minimum) in self.pdb_min.items():
                healthy = sum(
                    1
                    for p in self.pods.values()
                    if p.pod.labels.get("app") == app and p.pod.deletion_timestamp is None
                )
                if sp.pod.labels.get("app") == app and healthy - minimum <= 0:
                    self.events.append(f"429 {key}: pdb ml/{pdb_name}")
                    return
        self.accepted_evictions[key] += 1
        sp.pod = replace(sp.pod, deletion_timestamp=self.now)

    # --- what the invariants read ---------------------------------------------
    def disrupted(self) -> set[str]:
        """Nodes counting against maxUnavailable: every node unavailable, whoever made it so —
        cordoned (an admin's cordon too, also once the node runs its target), tainted,
        NotReady, or held mid-change."""
        out = set()
        for n in self.nodes.values():
            st = self.view(n.name).state
            busy = st is not None and not st.rolled_back
            if n.unschedulable or n.taints or not n.ready or busy:
                out.add(n.name)
        return out

    def held(self) -> set[str]:
        """Nodes carrying Tessera's marks (its taint, a rollout in flight, Tessera's own cordon):
        what an outside observer counts as held by Tessera."""
        out = set()
        for n in self.nodes.values():
            st = self.view(n.name).state
            busy = st is not None and not st.rolled_back
            tessera_cordon = n.unschedulable and not n.admin_cordoned
            if busy or tessera_cordon or any(t.key == GEOMETRY_PENDING.key for t in n.taints):
                out.add(n.name)
        return out

    def accel_pods_on(self, node: str) -> list[PodView]:
        """Accelerator pods that would make the MIG manager fail (its operand DaemonSets it pauses itself)."""
        return [
            p.pod
            for p in self.pods.values()
            if p.pod.node == node and p.pod.requests_accelerator and not p.pod.is_daemonset
        ]
