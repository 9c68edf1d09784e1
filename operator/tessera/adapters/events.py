"""Kubernetes Events for what Tessera did and why, on its objects and on Nodes.

Events are how ``kubectl describe`` explains an action. Repeating the same
reason and message for the same object would be noise and, worse, a write on
every resync of a converged cluster, so an event is posted only when it
differs from the last one posted for that object.

Events are sent in order by one background thread: an Event is a note about a
write, and sending it inline put two more round trips (the pool's event and
the node's) behind every action of a rollout. They are best effort either way.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from tessera.adapters.kube import ApiError, Kube, path_of

log = logging.getLogger("tessera.events")
EVENT_NAMESPACE = "default"  # where events about cluster-scoped objects live
BACKLOG = 10_000  # events waiting to be sent; beyond it new ones are dropped with a warning


EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class Ref:
    api_version: str
    kind: str
    name: str
    uid: str = ""
    namespace: str = ""


class EventRecorder:
    def __init__(self, kube: Kube, component: str = "tessera") -> None:
        self.kube = kube
        self.component = component
        self._last: dict[tuple[str, str], tuple[str, str]] = {}
        self._lock = threading.Lock()
        self._outbox: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue(BACKLOG)
        self._sender: threading.Thread | None = None
        self._once: dict[tuple[str, ...], None] = {}  # insertion-ordered, bounded by BACKLOG

    def first(self, *key: str) -> bool:
        """True the first time ``key`` is seen: for an Event due once per occurrence (one per
        blocked pod), not once per pass. Forgetting the oldest keys costs a repeat, no loss."""
        with self._lock:
            if key in self._once:
                return False
            if len(self._once) >= BACKLOG:
                del self._once[next(iter(self._once))]
            self._once[key] = None
            return True

    def post(
        self,
        ref: Ref,
        reason: str,
        message: str,
        now: datetime,
        type_: EventType = "Normal",
    ) -> None:
        key = (ref.kind, ref.name)
        with self._lock:
            if self._last.get(key) == (reason, message):
                return
            self._last[key] = (reason, message)
        log.info("%s %s/%s: %s: %s", type_, ref.kind, ref.name, reason, message)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace = ref.namespace or EVENT_NAMESPACE
        body = {
            "metadata": {"generateName": f"{ref.name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": ref.api_version,
                "kind": ref.kind,
                "name": ref.name,
                "uid": ref.uid,
                **({"namespace": ref.namespace} if ref.namespace else {}),
            },
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": self.component},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        with self._lock:
            if self._sender is None:
                self._sender = threading.Thread(target=self._send, name="events", daemon=True)
                self._sender.start()
        try:
            self._outbox.put_nowait((namespace, body))
        except queue.Full:
            log.warning("event backlog full; dropped %s on %s/%s", reason, ref.kind, ref.name)

    def _send(self) -> None:
        while True:
            namespace, body = self._outbox.get()
            try:
                self.kube.create(path_of("v1", "events", namespace=namespace), body)
            except ApiError as err:  # events are best effort; never fail a reconcile over one
                obj = body["involvedObject"]
                log.warning(
                    "could not post event %s on %s/%s: %s",
                    body["reason"],
                    obj["kind"],
                    obj["name"],
                    err,
                )
