"""Who wakes whom: one asyncio.Event per object, and the filters in front of them.

Every trigger ends in ``Wakeups.wake``; what a trigger is worth waking for is
decided here, from the parts of an object a reconcile actually reads. A
status write, a kubelet heartbeat or a node another pool owns wakes nobody,
so a pass runs only when something it reads has changed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from tessera.api.v1alpha1.common import LabelSelector
from tessera.controllers import nodepoolgeometry, sharingpolicy, tenantquota
from tessera.domain.base.idle import node_fingerprint
from tessera.domain.cluster import objects as cluster
from tessera.domain.rollout import PodView
from tessera.domain.rollout.machine import READS_PODS  # the drain, the recount before a change


class Wakeups:
    """One asyncio.Event per object: triggers set it, the object's daemon waits on it."""

    def __init__(self) -> None:
        self._events: dict[tuple[str, str], asyncio.Event] = {}
        self._starved: set[tuple[str, str]] = set()

    def starve(self, plural: str, name: str, starved: bool) -> None:
        """Whether the object waits for room anywhere in the cluster (its last pass said so)."""
        (self._starved.add if starved else self._starved.discard)((plural, name))

    def wake_starved(self) -> None:
        """Room may have appeared (a node came or changed, a pod went): wake who waits for it."""
        for plural, name in list(self._starved):
            self.wake(plural, name)

    def event(self, plural: str, name: str) -> asyncio.Event:
        return self._events.setdefault((plural, name), asyncio.Event())

    def wake(self, plural: str, name: str) -> None:
        self.event(plural, name).set()

    def wake_all(self, plural: str) -> None:
        for (kind, _), event in self._events.items():
            if kind == plural:
                event.set()

    def names(self, plural: str) -> set[str]:
        return {name for kind, name in self._events if kind == plural}

    def forget(self, plural: str, name: str) -> None:
        self._events.pop((plural, name), None)
        self._starved.discard((plural, name))


def object_fingerprint(body: Mapping[str, Any]) -> tuple[object, ...]:
    """What a custom object's reconcile reads of it: not its status, which the reconcile wrote.

    Without this every status write would wake the object's daemon for one more
    pass that finds nothing to do (half of all passes during a rollout).
    """
    meta = body.get("metadata") or {}
    return (
        meta.get("generation"),
        repr(meta.get("annotations")),
        repr(meta.get("labels")),
        meta.get("deletionTimestamp"),
        repr(body.get("spec")),
    )


class NodeWakeups:
    """Which daemons a Node change wakes: the pools that read the node, every SharingPolicy,
    and every TenantQuota (their capacity ledger counts every node and every pool's target).

    Pools are told apart by their node selector (kept from their own events) and
    by what the node carries (their rollout state or pending taint), before and
    after the change, so a node leaving a pool still wakes that pool. A pool
    whose selector is not known (yet, or not parseable) is always woken.
    """

    def __init__(self, wakeups: Wakeups, changed: Callable[[], None] = lambda: None) -> None:
        self.wakeups = wakeups
        self.changed = changed  # told of every change a decision reads, before anyone wakes
        self.selectors: dict[str, LabelSelector] = {}
        self.specs: dict[
            str, str
        ] = {}  # pool → its spec as last seen (TenantQuotas wake on change)
        self.nodes: dict[str, tuple[int, frozenset[str]]] = {}  # fingerprint's hash, readers
        self.holders: dict[str, str] = {}  # node → the owner whose rollout state it carries

    def pool_changed(self, name: str, spec: Mapping[str, Any] | None) -> None:
        """Keep the pool's selector; a new, changed or gone selector wakes every pool, since a
        node belongs to one pool only and the others' claims may have changed with it."""
        before = self.selectors.pop(name, None)
        if spec is not None:
            with contextlib.suppress(ValidationError):  # unknown: woken on every node change
                self.selectors[name] = LabelSelector.model_validate(spec.get("nodeSelector"))
        if spec is None or self.selectors.get(name) != before:
            self.wakeups.wake_all(nodepoolgeometry.PLURAL)
        spec_seen = None if spec is None else repr(sorted(spec.items()))
        if self.specs.get(name) != spec_seen:  # a new target: the ledger's "after" moves
            self.wakeups.wake_all(tenantquota.PLURAL)
        if spec_seen is None:
            self.specs.pop(name, None)
        else:
            self.specs[name] = spec_seen

    def node_changed(self, name: str, body: Mapping[str, Any] | None) -> None:
        before = self.nodes.get(name)
        # a hash: 10,000 nodes' labels are MiBs
        fingerprint = None if body is None else hash(node_fingerprint(body))
        if body is not None and before is not None and before[0] == fingerprint:
            return  # a heartbeat: nothing a decision reads has changed
        self.changed()  # counted first: should what follows fail, no pass skips this change
        if body is None or fingerprint is None:
            self.nodes.pop(name, None)
            self.holders.pop(name, None)
            reading: frozenset[str] = frozenset()
        else:
            reading = frozenset(cluster.pools_reading(body, self.selectors))
            self.nodes[name] = (fingerprint, reading)
            state = cluster.node_view(body).state
            if state is not None and state.phase in READS_PODS:
                self.holders[name] = state.owner
            else:
                self.holders.pop(name, None)
        unknown = self.wakeups.names(nodepoolgeometry.PLURAL) - set(self.selectors)
        for pool in reading | (before[1] if before else set()) | unknown:
            self.wakeups.wake(nodepoolgeometry.PLURAL, pool)
        self.wakeups.wake_all(sharingpolicy.PLURAL)
        self.wakeups.wake_all(tenantquota.PLURAL)  # the capacity ledger reads every node
        self.wakeups.wake_starved()

    def pods_changed(self, nodes: Iterable[str], frees_room: bool = False) -> None:
        """Pods came or went on ``nodes``: wake whoever is rolling those nodes out, nobody else.

        A drain's last pod going away is what its node waits for; without this the
        next step came only with the rollout's requeue (10 s) or the resync. A pod
        that gives back accelerators (``frees_room``) may free the room a pool waits
        for: those pools wake too — not on every status change of every pod.
        """
        if frees_room:
            self.wakeups.wake_starved()
        for node in nodes:
            owner = self.holders.get(node)
            if owner is None:
                continue
            kind, _, name = owner.partition("/")
            if kind == cluster.NPG_KIND:
                self.wakeups.wake(nodepoolgeometry.PLURAL, name)
            elif kind == sharingpolicy.KIND:
                self.wakeups.wake(sharingpolicy.PLURAL, name)


def frees_room(before: PodView | None, after: PodView | None) -> bool:
    """Whether a pod's change gives accelerators back: it went, finished or left its node."""
    if before is None or not before.node or not before.requests or before.terminal:
        return False
    return after is None or after.terminal or after.node != before.node


def pod_nodes(before: PodView | None, after: PodView | None) -> set[str]:
    """The nodes whose pods a change to one pod alters (both, when it moved)."""
    return {view.node for view in (before, after) if view is not None}
