"""This replica's hold on the writer Lease, kept exactly as long as one of its passes may run.

``tessera.domain.base.lease`` says why the Lease exists and decides who may hold
it; this module reads and writes it. Every pass (a reconcile or a finalize)
runs inside ``WriterLease.writing()``: the first one takes the Lease, a pass
that finds it held by a live peer writes nothing and comes back later. While
passes run, a renewer thread keeps the Lease fresh, so a long drain never
outlives it; a pass asks ``valid()`` before each stage of writes, so one whose
Lease could not be renewed admits nothing more. When the last daemon of this
replica has stopped (kopf paused or stopped it) *and* the last pass thread has
returned — which can be well after kopf gave up waiting for it — the Lease is
given back, so the next replica starts at once instead of waiting for it to
expire.

An idle replica writes nothing: the Lease is only renewed while a pass runs
or when one starts on a Lease past half its duration.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.domain.base import lease as decide
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
        self._lock = threading.Lock()  # the fields below
        self._writes = threading.Lock()  # one read-then-write of the Lease at a time
        self._passes = 0
        self._daemons = 0
        self._held = False
        self._renewed: datetime | None = None  # when we last wrote it, on our clock
        self._seen: tuple[tuple[str, str], datetime] | None = None  # a peer's record, since
        self._renewer: threading.Thread | None = None
        self._waiting_for = ""  # the holder we last said we wait for (said once per holder)
        self.on_taken: Callable[[], None] = lambda: None
        """Told when this replica takes the Lease (the node cache distrusts what it holds)."""

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
            if self._leave(passes=1):
                self.release()

    def valid(self) -> bool:
        """Held, with at least ``lease.SAFETY_S`` of its duration left."""
        with self._lock:
            return decide.usable(self._since_renewal(), self.duration_s)

    def daemon_started(self) -> None:
        with self._lock:
            self._daemons += 1

    def daemon_stopped(self) -> bool:
        """A daemon ended (its pass thread may still run: kopf cannot stop a thread).
        No I/O, safe on the event loop; True when ``release`` is due now."""
        return self._leave(daemons=1)

    # -- state ----------------------------------------------------------------------------------

    def _since_renewal(self) -> float:
        """Seconds since we last wrote the Lease; infinite when we do not hold it. Under _lock."""
        if not self._held or self._renewed is None:
            return float("inf")
        return (self.clock() - self._renewed).total_seconds()

    def _fresh(self) -> bool:
        with self._lock:
            return decide.fresh(self._since_renewal(), self.duration_s)

    def _leave(self, *, passes: int = 0, daemons: int = 0) -> bool:
        with self._lock:
            self._passes -= passes
            self._daemons -= daemons
            return self._passes == 0 and self._daemons == 0 and self._held

    # -- reads and writes -----------------------------------------------------------------------

    def _claim(self) -> decide.Claim:
        if self._fresh():  # held, well within its duration: no write
            return decide.Claim("held", f"held by {self.identity}")
        with self._writes:
            if self._fresh():  # a pass that waited for the lock just renewed it
                return decide.Claim("held", f"held by {self.identity}")
            return self._write_claim()

    def _write_claim(self, *, retry: bool = True) -> decide.Claim:
        now = self.clock()
        current = self.kube.get_or_none(self.path)
        view = decide.view_of((current or {}).get("spec"))
        claim = decide.claim(view, self.identity, now, self._seen_since(view, now))
        if claim.verdict == "wait":
            self._lost(claim.reason)
            self._report_wait(view.holder, claim.reason)
            return claim
        try:
            self._write(current, decide.spec_for(view, self.identity, now, self.duration_s))
        except ApiError as err:
            if err.conflict and retry:  # the record moved under us: read it again, once
                return self._write_claim(retry=False)
            raise
        with self._lock:
            self._waiting_for, self._seen = "", None
            if not self._held:
                log.info("took writer lease %s/%s (%s)", self.namespace, self.name, claim.reason)
                self.on_taken()  # before any pass can see the Lease held (``_fresh``)
            self._held, self._renewed = True, now
        metrics.WRITER_LEASE.set(1)
        return decide.Claim("held", claim.reason)

    def _seen_since(self, view: decide.LeaseView, now: datetime) -> datetime:
        """When we first saw this record; a new one (the holder renewed) restarts the count."""
        with self._lock:
            if self._seen is None or self._seen[0] != view.record:
                self._seen = (view.record, now)
            return self._seen[1]

    def _write(self, current: Obj | None, spec: dict[str, Any]) -> None:
        if current is None:
            body = {"metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
            self.kube.create(path_of(LEASES, "leases", namespace=self.namespace), body)
        else:  # the object as read (labels, annotations, resourceVersion kept), new spec
            self.kube.replace(self.path, {**current, "spec": spec})

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

    def release(self) -> None:
        """Give the Lease back if no pass or daemon of ours is left (re-checked)."""
        with self._writes:
            with self._lock:  # a pass that started meanwhile keeps it; a later one re-takes it
                if self._passes or self._daemons or not self._held:
                    return
                self._held, self._renewed = False, None
            metrics.WRITER_LEASE.set(0)
            try:
                current = self.kube.get_or_none(self.path)
                view = decide.view_of((current or {}).get("spec"))
                if current is not None and view.holder == self.identity:
                    self._write(current, decide.released_spec(view, self.clock()))
                    log.info("gave back writer lease %s/%s", self.namespace, self.name)
            except ApiError as err:  # it expires on its own; the next replica waits that long
                log.warning("writer lease %s/%s not given back: %s", self.namespace, self.name, err)

    # -- renewing while passes run --------------------------------------------------------------

    def _start_renewer(self) -> None:
        with self._lock:
            if self._renewer is not None:
                return
            self._renewer = threading.Thread(target=self._renew_loop, name="lease", daemon=True)
            self._renewer.start()

    def _renew_loop(self) -> None:
        """A third of the duration after each renewal while a pass runs; ends when none does."""
        period = decide.renew_period(self.duration_s)
        while True:
            with self._lock:
                if not (self._passes > 0 and self._held):
                    self._renewer = None  # decided under the lock: a new pass starts a new one
                    return
                due = period - self._since_renewal()
            if due > 0:
                time.sleep(min(due, period))
                continue
            try:
                self._renew()
            except Exception:  # the next tick retries; valid() stops new stages meanwhile
                log.exception("writer lease %s/%s not renewed", self.namespace, self.name)
                time.sleep(1.0)

    def _renew(self) -> None:
        with self._writes:
            with self._lock:  # the last pass may have ended and given it back meanwhile
                if not (self._passes > 0 and self._held):
                    return
            self._write_claim()
