"""HAMi's scheduler reads device-config.yaml once: pending until every pod is newer than the
change (server times), the rollout complete; --enable-ascend found in command or args."""

from __future__ import annotations

import json
from typing import Any

import pytest

from builders import PodWrapper
from tessera.domain.schedulers.hami import restart as r

CHANGE = "2026-12-02T03:00:00Z"
LABELS = {"app": "hami-scheduler"}


def _deployment(replicas: int = 1, *, updated: int = 1, available: int = 1, seen: int = 2) -> Any:
    return {
        "metadata": {"generation": 2},
        "spec": {"replicas": replicas, "selector": {"matchLabels": LABELS}},
        "status": {
            "observedGeneration": seen,
            "replicas": replicas,
            "updatedReplicas": updated,
            "availableReplicas": available,
        },
    }


def _pod(name: str, created: str, labels: dict[str, str] = LABELS, gone: bool = False) -> Any:
    built = PodWrapper(name).meta(uid=f"uid-{name}", creationTimestamp=created).labels(labels)
    return (built.meta(deletionTimestamp=created) if gone else built).obj()


# (deployment, pods, what has not read the change; None: all has)
CASES = {
    "pod older than the change": (_deployment(), [_pod("a", "2026-12-02T02:59:00Z")], ["a"]),
    "pod live when the change was dated, same second": (
        _deployment(),
        [_pod("live", CHANGE)],
        ["live"],
    ),
    "pod created later in the same second": (_deployment(), [_pod("a", CHANGE)], None),
    "pod newer": (_deployment(), [_pod("b", "2026-12-02T03:00:01Z")], None),
    "old pod terminating, new running": (
        _deployment(),
        [_pod("a", "2026-12-02T02:00:00Z", gone=True), _pod("b", "2026-12-02T03:01:00Z")],
        None,
    ),
    "another app's old pod": (
        _deployment(),
        [_pod("x", "2026-12-02T02:00:00Z", {"app": "other"}), _pod("b", "2026-12-02T03:01:00Z")],
        None,
    ),
    "new pod crash-looping (not available)": (
        _deployment(available=0),
        [_pod("b", "2026-12-02T03:01:00Z")],
        ["(rollout not complete)"],
    ),
    "rollout not yet observed": (
        _deployment(seen=1),
        [_pod("b", "2026-12-02T03:01:00Z")],
        ["(rollout not complete)"],
    ),
    "scaled to zero": (_deployment(0, updated=0, available=0), [], None),
}


@pytest.mark.parametrize(("deployment", "pods", "stale"), CASES.values(), ids=CASES)
def test_what_has_not_read_the_change(deployment: Any, pods: Any, stale: Any) -> None:
    assert r.stale(deployment, pods, CHANGE, frozenset({"uid-live"})) == stale


def test_the_stamp_is_the_servers_latest_time_with_the_files_digest() -> None:
    written = {
        "metadata": {
            "managedFields": [
                {"manager": "kubectl", "time": "2026-12-02T01:00:00Z"},
                {"manager": "tessera", "time": "2026-12-02T03:00:07Z"},
            ]
        }
    }
    stamp = r.stamp("vnpus: []\n", written, ["uid-b", "uid-a"])
    assert stamp is not None
    assert json.loads(stamp) == {
        "digest": r.digest("vnpus: []\n"),
        "at": "2026-12-02T03:00:07Z",
        "pods": ["uid-a", "uid-b"],
    }
    assert r.recorded({r.STAMP: stamp}) == {"uid-a", "uid-b"}
    assert r.stamped({r.STAMP: stamp}) == (r.digest("vnpus: []\n"), "2026-12-02T03:00:07Z")
    assert r.stamp("x", {"metadata": {}}) is None
    assert r.stamped({r.STAMP: "not json"}) == ("", "")


FLAGS = {
    "chart's --enable-ascend=true": (["--enable-ascend=true"], True),
    "bare flag": (["--enable-ascend"], True),
    "explicitly off": (["--enable-ascend=false"], False),
    "absent": (["--device-config-file=/device-config.yaml"], False),
}


@pytest.mark.parametrize(("args", "on"), FLAGS.values(), ids=FLAGS)
def test_enable_ascend_is_read_from_any_container(args: list[str], on: bool) -> None:
    containers = [
        {"name": "kube-scheduler", "command": ["kube-scheduler"]},
        {"name": "vgpu-scheduler-extender", "command": ["scheduler"], "args": args},
    ]
    deployment = {"spec": {"template": {"spec": {"containers": containers}}}}
    assert r.ascend_enabled(deployment) is on
