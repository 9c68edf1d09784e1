"""This replica's hold on the writer Lease, kept exactly as long as one of its passes may run.

``tessera.domain.lease`` says why the Lease exists and decides who may hold
it; this module reads and writes it. Every pass (a reconcile or a finalize)
runs inside ``WriterLease.writing()``: the first one takes the Lease, a pass
that finds it held by a live peer writes nothing and comes back later. While
passes run, a renewer thread keeps the Lease fresh, so a long drain never
outlives it. When the last daemon of this replica has stopped (kopf paused or
stopped it) *and* the last pass thread has returned — which can be well after
kopf gave up waiting for it — the Lease is given back, so the next replica
starts at once instead of waiting for it to expire.

An idle replica writes nothing: the Lease is only renewed while a pass runs
or when one starts on a Lease close to its expiry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.domain import lease as decide
from tessera.observability import metrics

log = logging.getLogger("tessera.lease")
LEASES = "coordination.k8s.io/v1"


class WriterLease:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        clock: Callable[[], datetime],
        duration_s: int = 15,
    ) -> None:
        self.kube = kube
        self.namespace, self.name, self.identity = namespace, name, identity
        self.clock = clock
        self.duration_s = duration_s
        self._lock = threading.Lock()  # the counters below
        self._writes = threading.Lock()  # reads-then-writes of the Lease
        self._passes = 0
        self._daemons = 0
        self._held = False
        self._renewed: datetime | None = None
        self._renewer: threading.Thread | None = None
        self._waiting_for = ""  # the holder we last said we wait for (said once per holder)

    @property
    def path(self) -> str:
        return path_of(LEASES, "leases", self.name, self.namespace)

    @contextmanager
    def writing(self) -> Iterator[decide.Claim]:
        """One pass: yields the claim; write only when its verdict is ``held``."""
        with self._lock:
            self._passes += 1
        try:
            claim = self._claim()
            if claim.verdict == "held":
                self._start_renewer()
            yield claim
        finally:
            self._leave(passes=1)

    def daemon_started(self) -> None:
        with self._lock:
            self._daemons += 1

    def daemon_stopped(self) -> None:
        """A daemon ended; its pass thread may still run (kopf cannot stop a thread)."""
        self._leave(daemons=1)

    def _leave(self, *, passes: int = 0, daemons: int = 0) -> None:
        with self._lock:
            self._passes -= passes
            self._daemons -= daemons
            idle = self._passes == 0 and self._daemons == 0 and self._held
        if idle:
            self._release()

    def _claim(self) -> decide.Claim:
        now = self.clock()
        with self._lock:
            fresh = (
                self._held
                and self._renewed is not None
                and (now - self._renewed).total_seconds() < self.duration_s / 2
            )
        if fresh:  # held, and well within its duration: no write
            return decide.Claim("held", f"held by {self.identity}")
        return self._take_or_renew(now)

    def _take_or_renew(self, now: datetime) -> decide.Claim:
        with self._writes:  # one writer of our own at a time: never a 409 against ourselves
            return self._write_claim(now)

    def _write_claim(self, now: datetime) -> decide.Claim:
        try:
            current = self.kube.get_or_none(self.path)
            view = decide.view_of((current or {}).get("spec"))
            claim = decide.claim(view, self.identity, now)
            if claim.verdict == "wait":
                self._lost(claim.reason)
                self._report_wait(view.holder, claim.reason)
                return claim
            spec = decide.spec_for(view, self.identity, now, self.duration_s)
            if current is None:
                self.kube.create(path_of(LEASES, "leases", namespace=self.namespace), _lease(
                    self.name, self.namespace, spec
                ))  # fmt: skip
            else:
                meta = current["metadata"]
                self.kube.replace(self.path, _lease(
                    self.name, self.namespace, spec, meta["resourceVersion"]
                ))  # fmt: skip
        except ApiError as err:
            if not err.conflict:
                raise
            self._lost("another replica wrote the Lease first")
            return decide.Claim("wait", f"{self.name}: another replica wrote it first")
        with self._lock:
            self._waiting_for = ""
            if not self._held:
                log.info("took writer lease %s/%s (%s)", self.namespace, self.name, claim.reason)
            self._held, self._renewed = True, now
        metrics.WRITER_LEASE.set(1)
        return decide.Claim("held", claim.reason)

    def _report_wait(self, holder: str, reason: str) -> None:
        with self._lock:
            new, self._waiting_for = holder != self._waiting_for, holder
        if new:
            log.info("writer lease %s/%s %s; waiting", self.namespace, self.name, reason)

    def _lost(self, reason: str) -> None:
        with self._lock:
            was, self._held = self._held, False
        metrics.WRITER_LEASE.set(0)
        if was:
            log.error("writer lease %s/%s lost: %s", self.namespace, self.name, reason)

    def _release(self) -> None:
        with self._writes:
            self._write_release()

    def _write_release(self) -> None:
        with self._lock:  # a pass that started meanwhile keeps it; one starting later re-takes it
            if self._passes or self._daemons or not self._held:
                return
            self._held, self._renewed = False, None
        metrics.WRITER_LEASE.set(0)
        now = self.clock()
        try:
            current = self.kube.get_or_none(self.path)
            view = decide.view_of((current or {}).get("spec"))
            if current is not None and view.holder == self.identity:
                meta = current["metadata"]
                spec = decide.released_spec(view, now)
                self.kube.replace(self.path, _lease(
                    self.name, self.namespace, spec, meta["resourceVersion"]
                ))  # fmt: skip
                log.info("gave back writer lease %s/%s", self.namespace, self.name)
        except ApiError as err:  # it expires on its own; the next replica waits that long
            log.warning("writer lease %s/%s not given back: %s", self.namespace, self.name, err)

    def _start_renewer(self) -> None:
        with self._lock:
            if self._renewer is not None:
                return
            self._renewer = threading.Thread(target=self._renew_loop, name="lease", daemon=True)
            self._renewer.start()

    def _renew_loop(self) -> None:
        """Every third of the duration while a pass runs; ends when none does."""
        while True:
            time.sleep(self.duration_s / 3)
            with self._lock:
                if not (self._passes > 0 and self._held):
                    self._renewer = None  # decided under the lock: a new pass starts a new one
                    return
            try:
                self._take_or_renew(self.clock())
            except Exception:  # the next tick retries; a pass start also renews
                log.exception("writer lease %s/%s not renewed", self.namespace, self.name)


def _lease(name: str, namespace: str, spec: dict[str, Any], version: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if version:
        meta["resourceVersion"] = version
    return {"apiVersion": LEASES, "kind": "Lease", "metadata": meta, "spec": spec}
