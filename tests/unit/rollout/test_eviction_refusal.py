"""A 429 from the Eviction API, in a person's words: the pod and the PDB the API server names."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from rollout_builders import T0, evicted, state

from builders.views import gpu_pod, pdb
from tessera.adapters.events import EventRecorder, Ref
from tessera.adapters.kube import ApiError, Kube
from tessera.api.v1alpha1.common import DrainSpec
from tessera.controllers.rollout.evictions import announce_held, refusal
from tessera.controllers.runtime import Context
from tessera.domain.rollout.draining import drain_pass
from tessera.domain.rollout.reporting import NodeReport
from tessera.domain.rollout.state import Phase

MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def refused(*causes: str) -> ApiError:
    body: dict[str, Any] = {"kind": "Status", "message": MESSAGE, "reason": "TooManyRequests"}
    if causes:
        body["details"] = {"causes": [{"reason": "DisruptionBudget", "message": m} for m in causes]}
    return ApiError(429, "TooManyRequests", MESSAGE, body)


CASES = {
    "the cause names the PDB": (
        refused("The disruption budget serving-pdb needs 1 healthy pods and has 1 currently"),
        "eviction of pod ml/a refused by PodDisruptionBudget ml/serving-pdb: "
        "The disruption budget serving-pdb needs 1 healthy pods and has 1 currently",
    ),
    "a PDB the disruption controller has not processed yet": (
        refused("The disruption budget web is still being processed by the server."),
        "eviction of pod ml/a refused by PodDisruptionBudget ml/web: "
        "The disruption budget web is still being processed by the server.",
    ),
    "no cause: the API server's own words": (
        refused(),
        f"eviction of pod ml/a refused: {MESSAGE}",
    ),
    "a cause naming no PDB is kept": (
        refused("pod disruption budget is being computed"),
        f"eviction of pod ml/a refused: {MESSAGE}; pod disruption budget is being computed",
    ),
}


@pytest.mark.parametrize("err,text", CASES.values(), ids=CASES.keys())
def test_refusal_names_the_pod_and_the_pdb(err: ApiError, text: str) -> None:
    assert refusal("ml", "a", err) == text


class _Posted:
    """An EventRecorder that keeps what it would post."""

    def __init__(self) -> None:
        self.recorder = EventRecorder(cast(Kube, None))
        self.posted: list[tuple[str, str, str]] = []
        self.recorder.post = self._post  # type: ignore[method-assign]

    def _post(self, ref: Ref, reason: str, message: str, *_: object) -> None:
        self.posted.append((ref.kind, reason, message))


def _announce(events: _Posted, uid: str, *, allowed: int = 0, sent: bool = False) -> None:
    """One pass of a drain on ml/db-0 (that pod's incarnation ``uid``) under a PDB allowing
    ``allowed`` disruptions; ``sent``: an eviction went out a moment ago."""
    pod = gpu_pod("db-0", uid=uid, labels={"app": "db"})
    s = state(Phase.DRAINING, evictions=evicted(pod.key, 1, 1) if sent else {})
    dp = drain_pass(
        s,
        pods=[pod],
        pdbs=[pdb("db", allowed, app="db")],
        pdb_budget={"ml/db": allowed},
        drain=DrainSpec(),
        now=T0,
        timed_out=False,
    )
    report = NodeReport("gpu-1", Phase.DRAINING, "new", held=tuple(dp.held))
    ctx = SimpleNamespace(events=events.recorder, clock=lambda: T0)
    announce_held(
        cast(Context, ctx), Ref("tessera.io/v1alpha1", "NodePoolGeometry", "h100"), [report]
    )


def test_eviction_blocked_is_announced_once_per_pod_and_again_for_a_new_pod_of_that_name() -> None:
    """A StatefulSet pod keeps its name across rollouts: a later rollout it holds up is news."""
    events = _Posted()
    _announce(events, "uid-1")
    assert [(k, r) for k, r, _ in events.posted] == [
        ("NodePoolGeometry", "EvictionBlocked"),
        ("Node", "EvictionBlocked"),
    ]
    assert "ml/db-0" in events.posted[0][2] and "ml/db" in events.posted[0][2]
    _announce(events, "uid-1")  # the next pass: nothing new
    assert len(events.posted) == 2
    _announce(events, "uid-2")  # recreated under the same name, held up again
    assert len(events.posted) == 4


def test_an_eviction_sent_a_moment_ago_is_no_refusal_to_announce() -> None:
    """The pod may simply not show its deletion yet: only the API server's 429 (posted where
    it is answered) or a PDB allowing no disruption is an EvictionBlocked Event."""
    events = _Posted()
    _announce(events, "uid-1", allowed=1, sent=True)
    assert events.posted == []
