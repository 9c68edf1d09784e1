"""Kubernetes Events for what Tessera did and why, on its objects and on Nodes.

Events are how ``kubectl describe`` explains an action. Repeating the same
reason and message for the same object would be noise and, worse, a write on
every resync of a converged cluster, so an event is posted only when it
differs from the last one posted for that object.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from tessera.adapters.kube import ApiError, Kube, path_of

log = logging.getLogger("tessera.events")
EVENT_NAMESPACE = "default"  # where events about cluster-scoped objects live


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

    def post(
        self,
        ref: Ref,
        reason: str,
        message: str,
        now: datetime,
        type_: Literal["Normal", "Warning"] = "Normal",
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
        try:
            self.kube.create(path_of("v1", "events", namespace=namespace), body)
        except ApiError as err:  # events are best effort; never fail a reconcile over one
            log.warning("could not post event %s on %s/%s: %s", reason, ref.kind, ref.name, err)
