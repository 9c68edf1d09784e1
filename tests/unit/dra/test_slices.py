"""Devices counted from ResourceSlices; nodes whose driver publishes nothing yet."""

from __future__ import annotations

from typing import Any

import pytest

from builders.dra import ResourceSliceWrapper
from tessera.domain.dra import slices


def test_counts_by_what_a_class_selects_on_the_pool_nodes_only() -> None:
    published = [
        ResourceSliceWrapper("n1").gpu(0).mig(1, "1g.10gb").mig(1, "1g.10gb", 1).obj(),
        ResourceSliceWrapper("n2").mig(0, "1g.10gb+me").obj(),
        ResourceSliceWrapper("other").gpu(0).obj(),
        ResourceSliceWrapper("n1", driver="compute-domain.nvidia.com").gpu(3).obj(),
    ]
    found = slices.selected(published, ["n1", "n2"])
    assert dict(found) == {"gpu": 1, "1g.10gb": 2, "1g.10gb+me": 1}


def test_only_the_newest_generation_counts() -> None:
    old = ResourceSliceWrapper("n1", generation=1).gpu(0).gpu(1).meta(name="old").obj()
    new = ResourceSliceWrapper("n1", generation=2).mig(0, "1g.10gb").obj()
    assert dict(slices.selected([old, new], ["n1"])) == {"1g.10gb": 1}


def test_without_driver_names_the_nodes() -> None:
    published = [
        ResourceSliceWrapper("n1").gpu(0).obj(),
        ResourceSliceWrapper("n2", driver="other.example.com").gpu(0).obj(),
    ]
    assert slices.without_driver(published, ["n3", "n1", "n2"]) == ("n2", "n3")


def _part(n: int, generation: int, count: int) -> dict[str, Any]:
    """Slice ``n`` of node n1's pool, published in ``count`` slices at ``generation``."""
    built = (
        ResourceSliceWrapper("n1", generation=generation).gpu(n).meta(name=f"n1-{n}-{generation}")
    )
    obj = built.obj()
    obj["spec"]["pool"]["resourceSliceCount"] = count
    return obj


@pytest.mark.parametrize(
    ("published", "want"),
    [
        # both slices of the pool published: every device counts
        pytest.param([_part(0, 1, 2), _part(1, 1, 2)], {"gpu": 2}, id="complete"),
        # one of two: kube-scheduler does not allocate from an incomplete pool
        pytest.param([_part(0, 1, 2)], {}, id="incomplete-not-counted"),
        # a new generation half published: the old one is no longer used, the new not yet
        pytest.param([_part(0, 1, 1), _part(1, 2, 2)], {}, id="newest-incomplete"),
        pytest.param([_part(0, 1, 1), _part(1, 2, 2), _part(2, 2, 2)], {"gpu": 2}, id="newest"),
    ],
)
def test_only_complete_pools_count(published: list[dict[str, Any]], want: dict[str, int]) -> None:
    assert dict(slices.selected(published, ["n1"])) == want
