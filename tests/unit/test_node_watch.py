"""The Nodes' watch passes on what a decision reads — and a node deleted while no watch ran."""

from __future__ import annotations

from typing import Any, cast

from tessera.adapters.kube import Kube
from tessera.adapters.node_watch import NodeWatch
from tessera.domain.idle import node_fingerprint


def _node(name: str, beat: str = "0", **labels: str) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True", "lastHeartbeatTime": beat}
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": [ready]}}


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
