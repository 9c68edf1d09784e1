"""A vGPU layout verifies under either driver's resource name.

The sandbox device plugin names a resource after the driver's mdev type: ``NVIDIA <type>`` on
current drivers, ``GRID <type>`` on older ones. A fresh node advertises neither before its
first layout, so Tessera cannot know which to expect: a count matches under one name when the
other shows none; every resource the layout drops must still be 0 under both.
"""

from __future__ import annotations

import pytest
from rollout_builders import kinds
from test_vgpu_states import NEW, _node

from tessera.domain.rollout.state import TargetSpec
from tessera.domain.rollout.targets import alloc_diff
from tessera.domain.rollout.views import NodeView

N20, G20 = "nvidia.com/NVIDIA_A100-20C", "nvidia.com/GRID_A100-20C"
N10, G10 = "nvidia.com/NVIDIA_A100-10C", "nvidia.com/GRID_A100-10C"


def _diff(want: dict[str, int], have: dict[str, int]) -> str:
    target = TargetSpec("t", {}, None, want)
    node = NodeView(name="n", labels={}, unschedulable=False, ready=True, allocatable=have)
    return alloc_diff(target, node)


# (expected, node's allocatable, mismatch text or "" when it matches)
TABLE = [
    ({N20: 8}, {N20: 8}, ""),  # current driver, as expected
    ({N20: 8}, {G20: 8}, ""),  # older driver on a fresh node: GRID_ name, same count
    ({G20: 8}, {N20: 8}, ""),  # a driver upgrade: NVIDIA_ name where GRID_ was seen
    ({N20: 8, G20: 0}, {G20: 8}, ""),  # a stale 0 under the other name pins nothing
    ({N20: 8}, {G20: 4}, f"allocatable {N20} is 0, want 8 (or as {G20}, which is 4)"),
    ({N20: 8}, {N20: 4, G20: 4}, f"allocatable {N20} is 4, want 8"),  # never split
    ({N20: 8}, {N20: 8, G20: 8}, f"allocatable {N20} is 8, want 8 (or as {G20}, which is 8)"),
    ({N20: 8, N10: 0}, {G20: 8, G10: 16}, f"allocatable {N10} is 0, want 0 (or as {G10}"),
    ({N20: 8, G10: 0}, {G20: 8, N10: 16}, f"allocatable {N10} is 16, want 0"),  # gone: both
    ({"nvidia.com/mig-1g.5gb": 7}, {"nvidia.com/mig-1g.5gb": 7}, ""),  # others: one name
    ({"nvidia.com/mig-1g.5gb": 7}, {"nvidia.com/gpu": 7}, "mig-1g.5gb is 0, want 7"),
]


@pytest.mark.parametrize(("want", "have", "text"), TABLE)
def test_vgpu_counts_match_under_either_drivers_name(
    want: dict[str, int], have: dict[str, int], text: str
) -> None:
    diff = _diff(want, have)
    assert (text in diff) if text else diff == "", diff
    assert bool(diff) == bool(text)


def test_a_fresh_node_on_an_older_driver_verifies_its_first_layout() -> None:
    assert NEW.expected_allocatable == {"nvidia.com/NVIDIA_A100-20C": 4}
    plan = _node("success", {"nvidia.com/GRID_A100-20C": 4})
    actions = [a for stage in plan.stages for a in stage]
    assert "Uncordon:gpu-1" in kinds(actions), plan.nodes[0].message
