"""The per-object runner: one object's reconcile passes, one at a time, woken or on a timer.

``tessera.handlers`` starts one ``run`` per custom object (a kopf daemon) and
wakes it when something that matters to the object changes. Between passes the
runner waits for a wake-up or for the delay the last pass asked for: the
resync interval, a requeue the plan asked for, a second while a peer holds the
writer Lease — or, after a failed pass, its backoff: 1 s doubling per failed
pass in a row up to ``--retry-cap-seconds``, reset by the first pass that
succeeds (``tessera.domain.base.failures.backoff``). The pass itself reports the
failure in the object's status (``skeleton``); what escapes it here (the object
could not even be read) is logged and retried the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from tessera.adapters.kube import ApiError
from tessera.controllers.runtime import STOPPING, Context, Result
from tessera.controllers.writer_lease import WriterLease
from tessera.domain.base import failures
from tessera.observability import metrics

log = logging.getLogger("tessera.loop")
T = TypeVar("T")
LEASE_RETRY_S = 1.0
"""A pass that finds the writer Lease held by a live peer looks again this much later."""


@dataclass(frozen=True)
class Controller:
    kind: str
    plural: str
    reconcile: Callable[[Context, str], Result]
    finalize: Callable[[Context, str], bool]  # True once nothing of the object is left


class Wakes(Protocol):
    """Where an object's wake-ups come from (``tessera.handlers.wakeups.Wakeups``)."""

    def event(self, plural: str, name: str) -> asyncio.Event: ...
    def starve(self, plural: str, name: str, starved: bool) -> None: ...
    def forget(self, plural: str, name: str) -> None: ...


@dataclass(frozen=True)
class Waiting:
    """A pass that did not run: another replica holds the writer Lease."""

    reason: str


async def run(
    ctx: Context,
    wakes: Wakes,
    controller: Controller,
    name: str,
    stopped: Callable[[], bool],
    lease: WriterLease | None = None,
) -> None:
    """Reconcile ``name`` until ``stopped``; ``lease``: hold this writer Lease for every pass."""
    plural = controller.plural
    STOPPING.set(stopped)  # this task's context, copied into each pass
    wake = wakes.event(plural, name)
    seconds = metrics.RECONCILE_SECONDS.labels(controller.kind)
    if lease is not None:
        lease.daemon_started()
    try:
        while not stopped():
            wake.clear()
            started = time.monotonic()
            try:
                result = await asyncio.to_thread(
                    guarded, lease, lambda: controller.reconcile(ctx, name)
                )
                delay = _after(ctx, wakes, plural, name, result)
            except Exception as err:
                delay = _failed(ctx, plural, name, err)
            seconds.observe(time.monotonic() - started)
            waiter = asyncio.ensure_future(wake.wait())
            try:
                await asyncio.wait({waiter}, timeout=delay)
            finally:
                waiter.cancel()
    finally:
        wakes.forget(plural, name)
        ctx.streaks.succeeded(plural, name)
        if lease is not None and lease.daemon_stopped():  # counted here: cannot be lost
            await asyncio.shield(asyncio.to_thread(lease.release))


def _after(ctx: Context, wakes: Wakes, plural: str, name: str, result: Result | Waiting) -> float:
    """Seconds until the next pass unless woken; an object waiting for room wakes on any change."""
    if isinstance(result, Waiting):
        return LEASE_RETRY_S
    wakes.starve(plural, name, result.starved)
    if result.failures:
        return _backoff(ctx, result.failures)
    ctx.streaks.succeeded(plural, name)  # the backoff starts again from its base
    return result.requeue_after or ctx.settings.resync_seconds


def _failed(ctx: Context, plural: str, name: str, err: Exception) -> float:
    """A pass that raised (its object could not be read): log it, back off."""
    tries = ctx.streaks.failed(plural, name, ctx.clock()).tries
    delay = _backoff(ctx, tries)
    if isinstance(err, ApiError):  # the message says it all: no stack for an answer
        level = logging.WARNING if failures.transient(err.status) else logging.ERROR
        log.log(level, "%s/%s: reconcile failed: %s; retrying in %.0f s", plural, name, err, delay)
    else:
        log.exception("%s/%s: reconcile failed; retrying in %.0f s", plural, name, delay)
    return delay


def _backoff(ctx: Context, tries: int) -> float:
    settings = ctx.settings
    return failures.backoff(tries, settings.retry_base_seconds, settings.retry_cap_seconds)


def guarded(lease: WriterLease | None, work: Callable[[], T]) -> T | Waiting:
    """Run one pass, holding the writer Lease when there is one."""
    if lease is None:
        return work()
    with lease.writing() as claim:
        if claim.verdict != "held":
            log.debug("writer lease %s; looking again in %.0f s", claim.reason, LEASE_RETRY_S)
            return Waiting(claim.reason)
        outer = STOPPING.get()  # a Lease that could not be renewed admits no further stage
        token = STOPPING.set(lambda: outer() or not lease.valid())
        try:
            return work()
        finally:
            STOPPING.reset(token)
