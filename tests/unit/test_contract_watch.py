"""Which SharingPolicy a pod contract's object wakes (handlers.contract_watch)."""

from __future__ import annotations

from typing import Any

import pytest

from tessera.handlers.contract_watch import declaring_policy


def _body(annotations: dict[str, str] | None) -> dict[str, Any]:
    return {"metadata": {"name": "x.pod-contract.tessera.io", "annotations": annotations}}


@pytest.mark.parametrize(
    ("annotations", "woken"),
    [
        ({"tessera.io/declared-by": "SharingPolicy/asc"}, "asc"),  # Tessera's: its policy
        ({"tessera.io/declared-by": "NodePoolGeometry/asc"}, None),  # another kind's
        ({"tessera.io/declared-by": "SharingPolicy/"}, None),  # no name
        ({}, None),  # labelled by hand, no declarer
        (None, None),  # no annotations at all
    ],
)
def test_the_declaring_policy_is_woken(annotations: dict[str, str] | None, woken: str) -> None:
    assert declaring_policy(_body(annotations)) == woken
