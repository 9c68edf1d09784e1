"""The node cache serves a pass only once this process's own writes are in it."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, cast

import pytest

from builders import NodeWrapper
from tessera.adapters.kube import ApiError, Kube
from tessera.adapters.node_cache import NodeCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _node(name: str, version: str, **labels: str) -> dict[str, Any]:
    return NodeWrapper(name).meta(resourceVersion=version).labels(labels).obj()


def _cache(*nodes: dict[str, Any]) -> tuple[NodeCache, Clock, list[str]]:
    clock, relists = Clock(), []
    cache = NodeCache(lambda n: n, relist=lambda: relists.append("relist"), clock=clock)
    cache.listing()
    for n in nodes:
        cache.seen("SYNC", n)
    cache.synced()
    return cache, clock, relists


def _versions(cache: NodeCache) -> dict[str, str]:
    nodes = cache.snapshot(wait_s=0)
    assert nodes is not None
    return {n["metadata"]["name"]: n["metadata"]["resourceVersion"] for n in nodes}


def _write(cache: NodeCache, name: str, version: str, *, seen_during: bool = False) -> None:
    token = cache.begin(f"/api/v1/nodes/{name}")
    if seen_during:
        cache.seen("MODIFIED", _node(name, version))
    cache.end(token, _node(name, version), maybe=False)


def test_nothing_is_served_before_the_first_list() -> None:
    cache = NodeCache(lambda n: n)
    assert cache.snapshot(wait_s=0) is None


def test_the_listed_nodes_are_served_and_changes_replace_them() -> None:
    cache, _, _ = _cache(_node("a", "1"), _node("b", "2"))
    cache.seen("MODIFIED", _node("a", "3"))
    cache.seen("DELETED", _node("b", "2"))
    assert _versions(cache) == {"a": "3"}


def test_an_own_write_not_yet_seen_holds_the_cache_back() -> None:
    cache, _, relists = _cache(_node("a", "1"))
    _write(cache, "a", "5")
    assert cache.snapshot(wait_s=0) is None  # waited, gave up: list afresh
    assert relists == ["relist"]  # and the watch is asked to list again


def test_an_own_write_is_served_once_the_watch_delivers_it() -> None:
    cache, _, _ = _cache(_node("a", "1"))
    _write(cache, "a", "5")
    cache.seen("MODIFIED", _node("a", "5"))
    assert _versions(cache) == {"a": "5"}


def test_a_write_seen_while_in_flight_counts_even_after_a_later_change() -> None:
    """Our cordon comes back after the watch delivered it and the agent's reaction to it."""
    cache, _, relists = _cache(_node("a", "1"))
    token = cache.begin("/api/v1/nodes/a")
    cache.seen("MODIFIED", _node("a", "5"))  # ours
    cache.seen("MODIFIED", _node("a", "6"))  # someone else's, right after
    cache.end(token, _node("a", "5"), maybe=False)
    assert _versions(cache) == {"a": "6"}
    assert relists == []


def test_a_snapshot_waits_for_the_watch_to_deliver_an_own_write() -> None:
    cache = NodeCache(lambda n: n)
    cache.listing()
    cache.seen("SYNC", _node("a", "1"))
    cache.synced()
    _write(cache, "a", "5")
    later = threading.Timer(0.05, cache.seen, ("MODIFIED", _node("a", "5")))
    later.start()
    nodes = cache.snapshot(wait_s=5)
    later.join()
    assert nodes is not None and nodes[0]["metadata"]["resourceVersion"] == "5"


def test_a_relist_begun_after_the_write_proves_it_seen() -> None:
    cache, clock, _ = _cache(_node("a", "1"))
    _write(cache, "a", "5")
    clock.now += 1
    cache.listing()
    cache.seen("SYNC", _node("a", "7"))  # listed after our write: ours or later
    cache.synced()
    assert _versions(cache) == {"a": "7"}


def test_a_relist_begun_before_the_write_does_not() -> None:
    cache, clock, _ = _cache(_node("a", "1"))
    clock.now += 1
    cache.listing()
    clock.now += 1
    _write(cache, "a", "5")
    cache.seen("SYNC", _node("a", "4"))  # read before our write landed
    cache.synced()
    assert cache.snapshot(wait_s=0) is None


def test_a_relist_replaces_everything_and_drops_what_went() -> None:
    cache, _, _ = _cache(_node("a", "1"), _node("b", "1"))
    cache.listing()
    cache.seen("SYNC", _node("a", "2"))
    assert cache.snapshot(wait_s=0) is None  # neither the old view nor half the new one
    cache.synced()
    assert _versions(cache) == {"a": "2"}


@pytest.mark.parametrize("maybe", [True, False])
def test_a_failed_write_distrusts_the_cache_only_when_it_may_have_landed(maybe: bool) -> None:
    cache, clock, relists = _cache(_node("a", "1"))
    token = cache.begin("/api/v1/nodes/a/status")
    cache.end(token, None, maybe=maybe)
    assert (cache.snapshot(wait_s=0) is None) is maybe
    assert relists == (["relist"] if maybe else [])
    clock.now += 1
    cache.listing()
    cache.seen("SYNC", _node("a", "2"))
    cache.synced()
    assert _versions(cache) == {"a": "2"}  # trusted again after a list begun later


def test_distrust_holds_until_a_list_begun_after_it() -> None:
    cache, clock, relists = _cache(_node("a", "1"))
    cache.listing()  # a list already under way when the Lease changed hands
    clock.now += 1
    cache.distrust()
    cache.synced()
    assert cache.snapshot(wait_s=0) is None
    clock.now += 1
    cache.listing()
    cache.synced()
    assert cache.snapshot(wait_s=0) is not None
    assert relists == ["relist"]


def test_writes_to_other_objects_are_not_tracked() -> None:
    cache, _, _ = _cache(_node("a", "1"))
    token = cache.begin("/api/v1/namespaces/x/configmaps/nodes")
    cache.end(token, {"metadata": {"name": "nodes", "resourceVersion": "9"}}, maybe=True)
    assert _versions(cache) == {"a": "1"}


class _Kube(Kube):
    """A Kube whose one answer is scripted: an object, or an ApiError raised."""

    def __init__(self, answer: dict[str, Any] | ApiError) -> None:
        super().__init__(cast(Any, None))
        self.answer = answer

    def _call(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        if isinstance(self.answer, ApiError):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "distrusted"),
    [
        (_node("a", "5"), False),
        (ApiError(409, "Conflict", "moved"), False),  # refused: never landed
        (ApiError(0, "TransportError", "reset"), True),  # no answer: may have landed
        (ApiError(504, "Timeout", "slow"), True),
    ],
)
def test_kube_tells_the_cache_of_each_node_write(
    answer: dict[str, Any] | ApiError, distrusted: bool
) -> None:
    cache, _, _ = _cache(_node("a", "1"))
    kube = _Kube(answer)
    kube.watch_writes(cache)
    with contextlib.suppress(ApiError):
        kube.patch("/api/v1/nodes/a", {"spec": {"unschedulable": True}})
    if not isinstance(answer, ApiError):
        cache.seen("MODIFIED", answer)
    assert (cache.snapshot(wait_s=0) is None) is distrusted


def test_while_a_list_is_under_way_nothing_is_served() -> None:
    """The list may already show an own write the old nodes lack (a 410 mid-watch)."""
    cache, _, _ = _cache(_node("a", "1"))
    cache.listing()
    _write(cache, "a", "5")
    cache.seen("SYNC", _node("a", "5"))  # the list shows our cordon...
    assert cache.snapshot(wait_s=0) is None  # ...the cache does not yet
    cache.synced()
    assert _versions(cache) == {"a": "5"}


def test_two_writes_to_one_node_returning_out_of_order_are_both_awaited() -> None:
    cache, _, _ = _cache(_node("a", "1"))
    first, second = cache.begin("/api/v1/nodes/a"), cache.begin("/api/v1/nodes/a")
    cache.end(second, _node("a", "7"), maybe=False)  # the later write's thread ran first
    cache.end(first, _node("a", "6"), maybe=False)
    cache.seen("MODIFIED", _node("a", "6"))
    assert cache.snapshot(wait_s=0) is None  # v7 not seen yet
    cache.listing()  # (the timeout asked for a re-list; run the watch on instead)
    cache.synced()
    cache.seen("MODIFIED", _node("a", "7"))
    assert _versions(cache)["a"] == "7"


def test_concurrent_writes_to_one_node_each_end_their_own_flight() -> None:
    """Two flights' version sets may be equal: each ends its own (a removal by equality once
    ended the other's, and the other's end then failed)."""
    cache, _, _ = _cache(_node("a", "1"))
    first, second = cache.begin("/api/v1/nodes/a"), cache.begin("/api/v1/nodes/a")
    cache.seen("MODIFIED", _node("a", "5"))  # both in flight: both sets {5}
    cache.end(second, _node("a", "5"), maybe=False)
    cache.seen("MODIFIED", _node("a", "6"))  # only the first still flies
    cache.end(first, _node("a", "6"), maybe=False)
    assert _versions(cache) == {"a": "6"}


def test_settle_waits_for_own_writes_without_serving_or_distrusting() -> None:
    cache, _clock, relists = _cache(_node("a", "1"))
    _write(cache, "a", "2")
    assert not cache.settle(wait_s=0)  # not seen yet, and no time to wait
    assert relists == []  # nor is the cache distrusted: only a snapshot's wait does that
    cache.seen("MODIFIED", _node("a", "2"))
    assert cache.settle(wait_s=0) and _versions(cache) == {"a": "2"}
