"""Skipping a pass that would decide what the last converged pass decided (``domain.base.idle``).

The Node change counter is kept by the watch that wakes the daemons (``tessera run`` hands
one in; the handlers bump it before they wake anyone), so a pass woken by a Node change
always sees the counter moved. The rest of a pass's inputs are few objects, read here with
one request each: the object itself, the other objects of its kinds, and the ConfigMaps it
reads and repairs. A Context without a counter (tests driving a controller directly, or
before the watch runs) never skips.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

from tessera.adapters.kube import Kube, Obj, path_of
from tessera.domain.base import idle

FULL_PASS_RESYNCS = 30
"""A full pass runs at least every this many resync periods, inputs unchanged or not."""


class NodeChanges:
    """How often a Node changed in a field a decision reads, as the watch reported it."""

    def __init__(self) -> None:
        self.count = 0

    def bump(self) -> None:
        self.count += 1


class Passes:
    """The last converged pass of each object, and whether the next one may be skipped."""

    def __init__(
        self,
        nodes: NodeChanges | None,
        full_every: float,
        clock: Callable[[], float] = time.monotonic,
        following: Callable[[], bool] = lambda: True,
        settle: Callable[[], None] = lambda: None,
    ) -> None:
        self._nodes = nodes
        self._following = following  # whether the watch counting Node changes sees them now
        self._settle = settle  # waits until the watch has counted this process's own writes
        self._full_every = full_every
        self._clock = clock
        self._last: dict[Hashable, idle.Converged] = {}
        self._unsettled: dict[Hashable, int] = {}  # passes in a row that did not converge
        self._lock = threading.Lock()

    def inputs(self, key: Hashable, read: Callable[[], tuple[Hashable, ...]]) -> idle.Inputs | None:
        """The summary of a pass's inputs: the Node counter first (read before anything the
        pass lists), then what ``read`` returns; None when no watch counts Node changes, or
        the one that does is down or re-listing after an error (a change may go uncounted).

        Not read after two passes in a row that did not converge (a rollout under way): its
        passes no longer pay those reads each time; the pass after it ends reads them (one
        full pass more), and only the next can be skipped. After one such pass they are
        read: a change that one pass writes and the next finds done (labels, configs) then
        needs no full pass more. The Node counter is read once the watch has counted this
        process's own Node writes (``settle``), so that they do not look like a change."""
        with self._lock:
            busy = self._unsettled.get(key, 0) >= 2
        if busy or self._nodes is None or not self._following():
            return None
        self._settle()
        count = self._nodes.count
        return (count, *read())

    def skip(self, key: Hashable, inputs: idle.Inputs | None) -> bool:
        with self._lock:
            last = self._last.get(key)
        return idle.skip(last, inputs, self._clock(), self._full_every)

    def done(self, key: Hashable, inputs: idle.Inputs | None, converged: bool) -> None:
        """Record a full pass: converged, its inputs are the ones to compare with next."""
        with self._lock:
            if converged and inputs is not None:
                self._last[key] = idle.Converged(inputs, self._clock())
            else:
                self._last.pop(key, None)
            if converged:
                self._unsettled.pop(key, None)
            else:
                self._unsettled[key] = self._unsettled.get(key, 0) + 1

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._last.pop(key, None)
            self._unsettled.pop(key, None)


def version(kube: Kube, path: str) -> str | None:
    """An object's resourceVersion (None: absent): any write to it, by anyone, changes it."""
    obj = kube.get_or_none(path)
    return None if obj is None else str(obj["metadata"].get("resourceVersion"))


def versions(kube: Kube, path: str) -> tuple[tuple[str, str], ...]:
    """(name, resourceVersion) of every object of a collection (the few custom objects)."""
    return tuple(sorted(_named(obj) for obj in kube.list(path)))


def generations(kube: Kube, path: str) -> tuple[tuple[str, str, int], ...]:
    """(name, uid, generation) of every object of a collection: their specs, not their status
    (the uid: one deleted and created again under its name starts at generation 1 again)."""
    return tuple(sorted(_generation(obj) for obj in kube.list(path)))


def configmap(kube: Kube, where: tuple[str, str]) -> str | None:
    namespace, name = where
    return version(kube, path_of("v1", "configmaps", name, namespace))


def _generation(obj: Obj) -> tuple[str, str, int]:
    meta = obj["metadata"]
    return meta["name"], str(meta.get("uid")), int(meta.get("generation", 0))


def _named(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta["name"], str(meta.get("resourceVersion"))
