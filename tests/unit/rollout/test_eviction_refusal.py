"""A 429 from the Eviction API, in a person's words: the pod and the PDB the API server names."""

from __future__ import annotations

from typing import Any

import pytest

from tessera.adapters.kube import ApiError
from tessera.controllers.evictions import refusal

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
