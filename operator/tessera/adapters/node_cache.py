"""The Nodes as the node watch last saw them, for a pass to read instead of listing every node.

A rollout pass over 1,000 nodes spent most of its time listing them all afresh (the JSON
of every node, decoded on every pass), while the node watch (``node_watch``) decodes every
change anyway. The catch is read-your-writes: a pass that admits nodes must never count
its budget on a view that lags its own cordons. So every write this process makes to a
Node (``Kube.watch_writes``) is tracked: ``snapshot`` serves the cache only once it holds
what each write returned, and otherwise answers ``None``, and the caller lists the nodes
from the API server as before (then ``confirm``).

What proves a write seen, without ever ordering resource versions (they are opaque): the
watch delivering that version, while the write was in flight or after; or a re-list that
began after the write returned. A write that failed may still have landed, a writer Lease
taken over from a peer comes with the peer's writes, and a write not seen within a second
is odd: each time the cache is distrusted until the watch has listed again (it is asked
to at once; a watch ends within 30 s). Someone else's change the watch has not delivered
yet is no different from one made just after a fresh list: only this process's writes
must be in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tessera.adapters.kube import Obj

NODES = "/api/v1/nodes/"


class NodeCache:
    def __init__(
        self,
        keep: Callable[[Obj], Obj],
        relist: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keep = keep  # what of a Node is kept (``idle.slim_node``)
        self._relist = relist  # asks the watch to list again
        self._clock = clock
        self._nodes: dict[str, Obj] = {}
        self._listed: dict[str, Obj] | None = None  # a re-list under way
        self._list_began = 0.0
        self._expected: dict[str, dict[str, float]] = {}  # node -> {version: written at}
        self._flying: dict[str, list[set[str]]] = {}  # versions seen during each write
        self._synced = False  # a list has completed
        self._distrusted: float | None = None  # since when, until a re-list begun later
        self._changed = threading.Condition()

    # -- fed by the watch's thread -------------------------------------------------------------

    def listing(self) -> None:
        with self._changed:
            self._listed, self._list_began = {}, self._clock()

    def seen(self, kind: str, obj: Obj) -> None:
        name, version = _name(obj), _version(obj)
        with self._changed:
            if kind == "DELETED":
                self._nodes.pop(name, None)
            elif kind == "SYNC" and self._listed is not None:
                self._listed[name] = self._keep(obj)
            else:
                self._nodes[name] = self._keep(obj)
            for versions in self._flying.get(name, ()):
                versions.add(version)
            waiting = self._expected.get(name, {})
            waiting.pop(version, None)
            if kind == "DELETED" or not waiting:
                self._expected.pop(name, None)
            self._changed.notify_all()

    def synced(self) -> None:
        """A list completed: it replaces the cache, and holds every write returned before it."""
        with self._changed:
            if self._listed is not None:
                self._nodes, self._listed = self._listed, None
            began = self._list_began
            later = {
                n: {v: t for v, t in e.items() if t >= began} for n, e in self._expected.items()
            }
            self._expected = {n: e for n, e in later.items() if e}
            if self._distrusted is not None and self._distrusted <= began:
                self._distrusted = None
            self._synced = True
            self._changed.notify_all()

    # -- the writes of this process (``Kube.watch_writes``) ------------------------------------

    def begin(self, path: str) -> tuple[str, set[str]] | None:
        name = _node_of(path)
        if not name:
            return None
        versions: set[str] = set()
        with self._changed:
            self._flying.setdefault(name, []).append(versions)
        return name, versions

    def end(self, token: tuple[str, set[str]] | None, returned: Obj | None, maybe: bool) -> None:
        """``returned``: the Node the API server answered with; ``None``: the write failed,
        and ``maybe`` it landed all the same (no answer, or a server error)."""
        if token is None:
            return
        name, versions = token
        with self._changed:
            flights = self._flying[name]
            flights[:] = [f for f in flights if f is not versions]  # sets alike are not this one
            if not flights:
                del self._flying[name]
            if returned is None:
                if maybe:
                    self._distrust()
                return
            version = _version(returned)
            if version not in versions and _version(self._nodes.get(name)) != version:
                # one entry per write: two writes to a node may come back in either order
                self._expected.setdefault(name, {})[version] = self._clock()

    # -- read by the passes --------------------------------------------------------------------

    def distrust(self) -> None:
        """Another writer may have written what this cache has not seen yet (a writer Lease
        just taken over): reads list afresh until the watch has listed again."""
        with self._changed:
            self._distrust()

    def settle(self, wait_s: float = 1.0) -> bool:
        """Wait up to ``wait_s`` until the watch has delivered each write of this process;
        whether it has. Nothing is served nor distrusted: a pass that is about to count Node
        changes calls it first, so that its own writes are already counted."""
        deadline = self._clock() + wait_s
        with self._changed:
            while self._expected:
                left = deadline - self._clock()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def snapshot(self, wait_s: float = 1.0) -> list[Obj] | None:
        """Every node, once each write of this process is seen (waiting up to ``wait_s``);
        ``None``: list them afresh. The nodes are shared: read-only."""
        deadline = self._clock() + wait_s
        with self._changed:
            while self._trusted() and self._expected:
                left = deadline - self._clock()
                if left <= 0:
                    self._distrust()
                    return None
                self._changed.wait(left)
            return list(self._nodes.values()) if self._trusted() else None

    def _trusted(self) -> bool:
        """Listed once, not distrusted, and not re-listing: while a list is under way the
        cache still holds the old nodes, though the list may already have shown a write."""
        return self._synced and self._distrusted is None and self._listed is None

    def _distrust(self) -> None:
        if self._distrusted is None:
            self._distrusted = self._clock()
            self._relist()


def _node_of(path: str) -> str:
    """``/api/v1/nodes/<name>`` or a subresource of it; "" for any other path."""
    if not path.startswith(NODES):
        return ""
    return path[len(NODES) :].split("/", 1)[0].split("?", 1)[0]


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _version(obj: Obj | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))
