"""The per-object runner's choice of delay between passes (controllers.loop)."""

from __future__ import annotations

import asyncio
from typing import cast

from tessera.adapters.kube import ApiError, Kube
from tessera.controllers import loop
from tessera.controllers.runtime import Context, Result, Settings


class Wakes:
    def __init__(self) -> None:
        self.starved: dict[str, bool] = {}

    def event(self, plural: str, name: str) -> asyncio.Event:
        return asyncio.Event()

    def starve(self, plural: str, name: str, starved: bool) -> None:
        self.starved[name] = starved

    def forget(self, plural: str, name: str) -> None:
        self.starved.pop(name, None)


def context() -> Context:
    settings = Settings(resync_seconds=60.0, retry_cap_seconds=8.0)
    return Context(cast(Kube, object()), settings)  # no API call is made here


def test_a_pass_that_raises_backs_off_doubling_to_the_cap() -> None:
    ctx = context()
    refused = ApiError(503, "ServiceUnavailable", "etcd is slow")
    delays = [loop._failed(ctx, "tenantquotas", "a", refused) for _ in range(6)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert loop._failed(ctx, "tenantquotas", "b", refused) == 1.0  # each object on its own


def test_a_failed_pass_backs_off_instead_of_its_requeue_and_a_good_one_does_not() -> None:
    ctx, wakes = context(), Wakes()
    failed = Result(requeue_after=0.5, failures=3)
    assert loop._after(ctx, wakes, "nodepoolgeometries", "p", failed) == 4.0
    assert loop._after(ctx, wakes, "nodepoolgeometries", "p", Result(requeue_after=0.5)) == 0.5
    assert loop._after(ctx, wakes, "nodepoolgeometries", "p", Result()) == 60.0
    assert loop._after(ctx, wakes, "nodepoolgeometries", "p", Result(starved=True)) == 60.0
    assert wakes.starved == {"p": True}


def test_a_pass_that_waits_for_the_writer_lease_looks_again_soon() -> None:
    ctx, wakes = context(), Wakes()
    delay = loop._after(ctx, wakes, "sharingpolicies", "s", loop.Waiting("held by a peer"))
    assert delay == loop.LEASE_RETRY_S
    assert wakes.starved == {}


def test_a_pass_that_succeeds_resets_the_backoff() -> None:
    ctx, wakes = context(), Wakes()
    refused = ApiError(0, "Unreachable", "connection refused")
    assert [loop._failed(ctx, "tenantquotas", "a", refused) for _ in range(3)] == [1.0, 2.0, 4.0]
    loop._after(ctx, wakes, "tenantquotas", "a", Result())
    assert loop._failed(ctx, "tenantquotas", "a", refused) == 1.0
