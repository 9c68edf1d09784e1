"""The Nodes' watch passes on what a decision reads — and a node deleted while no watch ran."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

from builders import NodeWrapper
from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube
from tessera.adapters.node_watch import NodeWatch
from tessera.domain.base.idle import node_fingerprint


def _node(name: str, beat: str = "0", **labels: str) -> dict[str, Any]:
    return NodeWrapper(name).labels(labels).ready().heartbeat(beat).obj()


def _watch() -> tuple[NodeWatch, list[tuple[str, str | None]]]:
    told: list[tuple[str, str | None]] = []
    watch = NodeWatch(cast(Kube, None), node_fingerprint)  # never started: fed by hand
    watch.subscribe(lambda name, obj: told.append((name, obj and obj["metadata"]["labels"]["p"])))
    return watch, told


def test_a_heartbeat_stops_here_a_change_passes() -> None:
    watch, told = _watch()
    watch._on_event("SYNC", _node("a", p="1"))
    watch._on_event("SYNC", _node("b", p="1"))
    watch._synced()
    watch._on_event("MODIFIED", _node("a", beat="5", p="1"))  # a heartbeat
    watch._on_event("MODIFIED", _node("b", p="2"))  # relabelled
    watch._on_event("DELETED", _node("a", p="1"))
    assert told == [("a", "1"), ("b", "1"), ("b", "2"), ("a", None)]


def test_a_relist_reports_what_went_and_what_changed_while_no_watch_ran() -> None:
    watch, told = _watch()
    for name in ("a", "b", "c"):
        watch._on_event("SYNC", _node(name, p="1"))
    watch._synced()
    told.clear()
    watch._on_event("SYNC", _node("a", p="1"))  # unchanged: nothing to say
    watch._on_event("SYNC", _node("c", p="9"))  # changed meanwhile
    watch._synced()  # b was deleted meanwhile
    assert told == [("c", "9"), ("b", None)]


class _Lists:
    """A Kube whose lists are scripted: each a list of pages, a page a list of nodes or an
    exception raised in its place; a watch waits (as an idle one does) then returns."""

    def __init__(self, *lists: list[list[dict[str, Any]] | BaseException]) -> None:
        self.lists = list(lists)
        self.stopped = threading.Event()

    def pages(self, path: str, **_: Any) -> Iterator[dict[str, Any]]:
        pages = self.lists.pop(0) if self.lists else []
        for page in pages:
            if isinstance(page, BaseException):
                raise page
            yield {"metadata": {"resourceVersion": "1"}, "items": page}

    def watch(self, path: str, **_: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        if self.lists:
            yield "ERROR", {}  # expired: re-list (the next scripted list)
        self.stopped.wait(0.05)


def _eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_an_informer_survives_any_error_of_a_list_and_keeps_delivering() -> None:
    kube = _Lists([RuntimeError("not an ApiError: a bug, a cut body")], [[_node("a", p="1")]])
    seen: list[tuple[str, str]] = []
    informer = Informer(
        cast(Kube, kube),
        "/api/v1/nodes",
        lambda k, o: seen.append((k, o["metadata"]["name"])),
        name="test",
    )
    informer.start()
    try:
        _eventually(lambda: ("SYNC", "a") in seen, "the list after the error")
        _eventually(informer.following.is_set, "following again")
        assert informer.is_alive()
    finally:
        informer.stop()
        kube.stopped.set()
        informer.join(5)


def test_a_node_deleted_while_a_relist_failed_half_way_is_reported_gone() -> None:
    a, b, c = (_node(name, p="1") for name in "abc")
    cut = ApiError(0, "TransportError", "cut mid-list")
    kube = _Lists([[a], [b, c]], [[a], cut], [[b, c]])  # a deleted after page 1 of list 2
    told: list[tuple[str, str | None]] = []
    watch = NodeWatch(cast(Kube, kube), node_fingerprint)
    watch.subscribe(lambda name, obj: told.append((name, obj and obj["metadata"]["name"])))
    watch.start()
    try:
        _eventually(lambda: ("a", None) in told, "a reported gone")
        _eventually(watch.following, "the watch following again")
        assert told == [("a", "a"), ("b", "b"), ("c", "c"), ("a", None)]
    finally:
        watch.stop()
        kube.stopped.set()


def test_a_watch_down_or_never_listed_is_not_following() -> None:
    kube = _Lists([[_node("a", p="1")]])
    watch = NodeWatch(cast(Kube, kube), node_fingerprint)
    assert not watch.following()  # not started
    watch.start()
    _eventually(watch.following, "listed")
    watch.stop()
    kube.stopped.set()
    watch._informer.join(5)
    assert not watch.following()  # its thread ended
