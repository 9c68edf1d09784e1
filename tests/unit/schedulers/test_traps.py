"""Volcano traps: one row per trap, what triggers it and whether pods would be stuck."""

from __future__ import annotations

import pytest

from tessera.domain.schedulers import traps as t
from tessera.domain.schedulers.versions import Version

V115, V116 = Version(1, 15, 0), Version(1, 16, 0)
WRAPPER = {"hamiVnpuCore": False, "configs": []}


@pytest.mark.parametrize(
    ("trap", "stuck", "says"),
    [
        (t.map_form_too_new(V115, WRAPPER, "kube-system/hami-scheduler-device"), True, "310P-only"),
        (t.map_form_too_new(V116, WRAPPER, "m"), None, ""),
        (t.map_form_too_new(V115, [], "m"), None, ""),
        (t.soft_slicing_too_old(V115, True), True, "v1.16"),
        (t.soft_slicing_too_old(V116, True), None, ""),
        (t.soft_slicing_too_old(V115, False), None, ""),
        (t.ignored_keys([{"chipName": "310P3", "memoryFactor": 2}]), False, "310P3.memoryFactor=2"),
        (
            t.ignored_keys([{"chipName": "310P3", "resourceCoreName": "x"}]),
            False,
            "resourceCoreName",
        ),
        (t.ignored_keys([{"chipName": "910C", "superPod": True}]), False, "superPod"),
        (
            t.ignored_keys([{"chipName": "310P3", "memoryFactor": 1, "runtimeClassName": ""}]),
            None,
            "",
        ),
        (
            t.ignored_keys(
                [{"chipName": "310P3", "resourceName": "a", "resourceCoreName": "a-core"}]
            ),
            None,
            "",
        ),
        (t.weight_skips_binpack("binpack", 0), False, "ScheduleWeight is 0"),
        (t.weight_skips_binpack("binpack", None), False, "ScheduleWeight is 0"),
        (t.weight_skips_binpack("binpack", 10), None, ""),
        (t.weight_skips_binpack("spread", 0), None, ""),
        (t.chips_without_entry({"910B4": ["npu-a"]}, ["310P3"]), True, "910B4 (pool npu-a)"),
        (t.chips_without_entry({"310P3": ["npu-a"]}, ["310P3"]), None, ""),
    ],
)
def test_trap(trap: t.Trap | None, stuck: bool | None, says: str) -> None:
    if stuck is None:
        assert trap is None
        return
    assert trap is not None and trap.stuck is stuck and says in trap.message
