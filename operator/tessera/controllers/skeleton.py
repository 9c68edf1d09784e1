"""The one reconcile pass all three controllers run: observe → plan → apply → status.

A controller supplies its steps (``Steps``): from the object it reads the
cluster, plans, applies, and says what the status holds and which verdict it
reached. The rest is done here once, the same way for every kind: read the
object, leave one being deleted to ``finalize``, and **always** write status —
also when the pass failed. An API error that escaped the steps, or a write of
the plan the API server refused (``refused``), becomes ``Reconciling`` or
``Stalled`` with the API's own message and an Event when that changes; a pass
that failed before its steps concluded keeps the kind's own conditions
(``Overcommitted``, …) as they were. A status that cannot be written (the
status verb revoked, the API server away) is logged and counted, never raised;
the failed pass backs off (``Result.failures``) like any other. The rules —
which refusal is reported, when an Event is posted, what counts as a failed
pass — are ``tessera.domain.base.failures``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from tessera.adapters.events import EventType
from tessera.adapters.kube import ApiError, Obj
from tessera.controllers.runtime import (
    Context,
    Result,
    custom_path,
    ref_of,
    spec_error,
    write_status,
)
from tessera.domain.base import failures, idle
from tessera.domain.base.conditions import Verdict, conditions_for, kept, warns
from tessera.domain.base.failures import Failure
from tessera.observability import metrics
from tessera.observability.tracing import span

log = logging.getLogger("tessera.reconcile")
S = TypeVar("S")
_REFUSED: ContextVar[list[Failure] | None] = ContextVar("refused", default=None)


@dataclass(frozen=True)
class PassOutcome:
    """What a controller's steps concluded about its object."""

    verdict: Verdict
    status: Mapping[str, Any] | None = None
    """The kind's status fields (conditions are added here); None keeps the status as it is,
    the kind's own conditions included, and reports only the verdict, with an Event (a spec
    that cannot be acted on, a pass that failed before its steps concluded)."""
    result: Result = field(default_factory=Result)


@dataclass(frozen=True)
class Kind(Generic[S]):
    kind: str
    plural: str
    spec: Callable[[Obj], S]
    """The object's spec, parsed; a ValidationError is reported as Stalled ``InvalidSpec``."""
    announce: bool = True
    """Post an Event when a not-Ready verdict changes the status (failures always post one)."""
    inputs: Callable[[Context, Obj], tuple[Hashable, ...]] | None = None
    """What a pass reads besides the Nodes, summarised (``skipping``): a pass that would read
    what the last converged one read is skipped. None: every pass runs in full."""


Steps = Callable[[Context, Obj, S], PassOutcome | None]
"""A controller's pass over its object and parsed spec; None when the object went away
during the pass."""


def refused(err: ApiError) -> None:
    """Note a write of the plan that the API server refused, for this pass to report.

    A 409 or 404 is a race (another writer, a node gone): the next pass re-plans from what
    really happened, which ``conditions.landed`` reports; it is no failure of the pass.
    """
    found = _REFUSED.get()
    if found is not None and not (err.conflict or err.not_found):
        found.append(Failure(err.status, str(err)))


def failed(failure: Failure) -> None:
    """Note a failure this pass reports whatever its status (a part of the pass that went on
    without it, like the DeviceClass sync): the same reporting as ``refused``."""
    found = _REFUSED.get()
    if found is not None:
        found.append(failure)


def run(ctx: Context, kind: Kind[S], name: str, steps: Steps[S]) -> Result:
    """One pass over the object ``name``; status written whatever happened in ``steps``."""
    obj = ctx.kube.get_or_none(custom_path(kind.plural, name))
    if obj is None or obj["metadata"].get("deletionTimestamp"):
        ctx.streaks.succeeded(kind.plural, name)
        return Result()
    key = (kind.kind, name)
    inputs = _inputs(ctx, kind, key, obj)
    if ctx.passes.skip(key, inputs):  # read before anything the pass reads
        log.info("%s/%s: pass skipped: its inputs are unchanged", kind.kind.lower(), name)
        return Result()
    written = ctx.kube.writes.total
    result, verdict = _run(ctx, kind, obj, steps)
    moved = ctx.kube.writes.total != written  # its writes, its status (or another's: look again)
    calm = verdict is not None and idle.converged(
        verdict, wrote=moved, requeue_after=result.requeue_after, starved=result.starved
    )
    ctx.passes.done(key, inputs, calm)
    return result


def _inputs(ctx: Context, kind: Kind[Any], key: Hashable, obj: Obj) -> idle.Inputs | None:
    """The pass's inputs summarised; None (run in full, and report) when they cannot be read."""
    read = kind.inputs
    if read is None:
        return None
    try:
        return ctx.passes.inputs(key, lambda: read(ctx, obj))
    except ApiError:  # the pass itself meets the same error, and reports it
        return None
    except Exception:  # inputs not known: never a reason to skip, nor to fail before the pass
        log.exception(
            "%s/%s: its inputs could not be read", kind.kind.lower(), obj["metadata"]["name"]
        )
        return None


def _run(ctx: Context, kind: Kind[S], obj: Obj, steps: Steps[S]) -> tuple[Result, Verdict | None]:
    """The pass, and the verdict it reported (None: it failed, or the object went away)."""
    name = obj["metadata"]["name"]
    with span("reconcile", kind=kind.kind, name=name), _noting() as found:
        failure: Failure | None = None
        out: PassOutcome | None
        try:
            out = _parsed(ctx, kind, obj, steps)
        except ApiError as err:  # the message says it all: no stack for an answer
            level = logging.WARNING if failures.transient(err.status) else logging.ERROR
            log.log(level, "%s/%s: reconcile failed: %s", kind.plural, name, err)
            out, failure = (
                PassOutcome(Verdict("progressing", "", "")),
                Failure(err.status, str(err)),
            )
        except Exception as err:
            log.exception("%s/%s: reconcile failed", kind.plural, name)
            text = f"{type(err).__name__}: {err} (a bug in Tessera; see the operator's log)"
            out, failure = (
                PassOutcome(Verdict("progressing", "", "")),
                Failure(failures.INTERNAL, text),
            )
        if out is None:
            ctx.streaks.succeeded(kind.plural, name)
            return Result(), None
        failure = failure or failures.reported(found)
        return _report(ctx, kind, obj, out, failure), out.verdict if failure is None else None


def _parsed(ctx: Context, kind: Kind[S], obj: Obj, steps: Steps[S]) -> PassOutcome | None:
    try:
        spec = kind.spec(obj)
    except ValidationError as err:  # nothing can be planned: say which field, keep the rest
        return PassOutcome(Verdict("stalled", "InvalidSpec", spec_error(err)))
    return steps(ctx, obj, spec)


@contextmanager
def _noting() -> Iterator[list[Failure]]:
    found: list[Failure] = []
    token = _REFUSED.set(found)
    try:
        yield found
    finally:
        _REFUSED.reset(token)


def _report(
    ctx: Context, kind: Kind[Any], obj: Obj, out: PassOutcome, failure: Failure | None
) -> Result:
    name, generation = obj["metadata"]["name"], obj["metadata"].get("generation", 0)
    verdict, tries = out.verdict, 0
    if failure is not None:
        streak = ctx.streaks.failed(kind.plural, name, ctx.clock())
        tries, elapsed = streak.tries, (ctx.clock() - streak.since).total_seconds()
        verdict = failures.verdict(failure, tries, elapsed, out.verdict.extra)
    old = obj.get("status") or {}
    status = dict(out.status if out.status is not None else old)
    status["observedGeneration"] = generation
    previous = old.get("conditions") or []
    status["conditions"] = conditions_for(verdict, generation, previous, ctx.clock())
    if out.status is None:  # no finding of its own: the kind's conditions stay as they were
        status["conditions"] += kept(previous)
    written = True
    try:
        wrote = write_status(ctx, kind.plural, obj, status)
    except ApiError as err:  # never crash the loop: the next pass tries again, backing off
        log.error("%s/%s: could not write status: %s", kind.plural, name, err)
        metrics.STATUS_WRITE_FAILURES.labels(kind.kind).inc()
        wrote = written = False
    if not failures.counts_as_failed(failure is not None, written):
        ctx.streaks.succeeded(kind.plural, name)
    elif not tries:
        tries = ctx.streaks.failed(kind.plural, name, ctx.clock()).tries
    loud = failure is not None or out.status is None
    if failures.announces(verdict, previous, loud=loud, wrote=wrote, announce=kind.announce):
        type_: EventType = "Warning" if warns(verdict) else "Normal"
        ctx.events.post(ref_of(obj), verdict.reason, verdict.message, ctx.clock(), type_)
    metrics.RECONCILES.labels(kind.kind, verdict.state).inc()
    return replace(out.result, failures=tries)
