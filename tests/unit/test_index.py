"""The pod index's bookkeeping: moves between groups, and a re-list swapped in whole."""

from __future__ import annotations

from typing import Any, cast

from builders import PodWrapper
from tessera.adapters.index import Index
from tessera.adapters.kube import Kube


def pod(name: str, node: str) -> dict[str, Any]:
    return PodWrapper(name).namespace("ml").node(node).obj()


def project(obj: dict[str, Any]) -> tuple[str, str] | None:
    node = obj["spec"].get("nodeName")
    return (node, obj["metadata"]["name"]) if node else None


def index() -> Index[str]:
    built: Index[str] = Index(cast(Kube, None), "/api/v1/pods", project, name="test")
    built._informer.synced.set()  # driven by hand below, as its informer thread would
    return built


def test_an_object_that_moves_leaves_its_old_group() -> None:
    idx = index()
    idx._on_event("ADDED", pod("a", "n1"))
    idx._on_event("MODIFIED", pod("a", "n2"))
    assert idx.get(["n1", "n2"]) == {"n1": [], "n2": ["a"]}
    idx._on_event("DELETED", pod("a", "n2"))
    assert idx.get(["n2"]) == {"n2": []}


def test_a_relist_is_invisible_until_complete_then_replaces_everything() -> None:
    idx = index()
    idx._on_event("ADDED", pod("gone", "n1"))
    idx._on_event("SYNC", pod("kept", "n1"))
    assert idx.get(["n1"]) == {"n1": ["gone"]}, "half a re-list must not show"
    idx._swap()
    assert idx.get(["n1"]) == {"n1": ["kept"]}
    idx._on_event("DELETED", pod("kept", "n1"))
    assert idx.get(["n1"]) == {"n1": []}


def test_nothing_before_the_first_list() -> None:
    idx: Index[str] = Index(cast(Kube, None), "/api/v1/pods", project, name="test")
    assert idx.get(["n1"]) is None


def test_listeners_hear_each_watched_change_but_not_a_relist() -> None:
    idx = index()
    heard: list[tuple[str | None, str | None]] = []
    idx.subscribe(lambda before, after: heard.append((before, after)))
    idx._on_event("ADDED", pod("a", "n1"))
    idx._on_event("MODIFIED", pod("a", "n1"))  # the same projection: nothing to tell
    idx._on_event("SYNC", pod("b", "n1"))
    idx._swap()
    idx._on_event("DELETED", pod("b", "n1"))
    assert heard == [(None, "a"), ("b", None)]
