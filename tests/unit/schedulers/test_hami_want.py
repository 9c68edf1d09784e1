"""The asks of the policies naming one HAMi config, joined; conflicts and traps named."""

from __future__ import annotations

from typing import Any

import pytest

from tessera.api.v1alpha1.scheduler import SchedulerSpec
from tessera.api.v1alpha1.sharingpolicy import HamiCore
from tessera.domain.schedulers.demands import PolicyDemand
from tessera.domain.schedulers.hami.want import join
from tessera.domain.schedulers.versions import Detected, Version

WHERE = "kube-system/hami-scheduler-device (device-config.yaml)"
HAMI = SchedulerSpec(name="HAMi")


def ask(
    policy: str,
    *,
    chips: tuple[str, ...] = ("310P3",),
    soft: bool | None = True,
    version: str | None = "v2.10.0",
    core: HamiCore | None = None,
) -> PolicyDemand:
    found = {"hami": Detected(_v(version), "image")} if version else {}
    unknown = {} if version else {"hami": "hami version unknown: declare it"}
    return PolicyDemand(
        policy, HAMI, chips, bool(soft), core, found, unknown, ascend=soft is not None
    )


def _v(text: str) -> Version:
    major, minor, patch = (int(p) for p in text.lstrip("v").split("."))
    return Version(major, minor, patch)


def test_agreeing_policies_join_into_one_want() -> None:
    core = HamiCore(device_split_count=4)
    joined = join(
        WHERE,
        [ask("a"), ask("b", chips=("Ascend910B4",)), ask("g", chips=(), soft=None, core=core)],
    )
    assert joined.verdicts == {}
    assert joined.want is not None
    assert (joined.want.chips, joined.want.hami_vnpu_core) == (("310P3", "910B4"), True)
    assert joined.want.nvidia == {
        "deviceSplitCount": 4,
        "deviceMemoryScaling": 1.0,
        "deviceCoreScaling": 1.0,
    }
    assert str(joined.version) == "v2.10.0 (image)"


@pytest.mark.parametrize(
    ("asks", "reasons", "words"),
    [
        # the policies' asks, each one's reason, words of the first one's message
        ([ask("a", version=None), ask("b", version=None)],
         {"a": "SchedulerVersionUnknown", "b": "SchedulerVersionUnknown"}, "declare it"),
        ([ask("a", version="v2.8.0"), ask("b")],
         {"a": "Conflict", "b": "Conflict"}, "disagree on HAMi's version (a: v2.8.0 (image), b: v2.10.0 (image))"),
        ([ask("a", soft=True), ask("b", soft=False), ask("c", chips=(), soft=None)],
         {"a": "Conflict", "b": "Conflict"}, "disagree on hamiVnpuCore in " + WHERE + " (a wants true; b wants false)"),
        ([ask("a", core=HamiCore(device_split_count=4)), ask("b", core=HamiCore())],
         {"a": "Conflict", "b": "Conflict"}, "b wants deviceSplitCount 10"),
        ([ask("a", version="v2.8.0")],
         {"a": "SchedulerTrap"}, "spec.ascend.mode HAMiCore (softSlicing: true) needs HAMi v2.9 or newer"),
        ([ask("a", chips=("910Z9",))],
         {"a": "SchedulerTrap"}, "chip 910Z9 of its nodes has no vnpus entry"),
    ],
)  # fmt: skip
def test_what_cannot_be_joined_is_named(
    asks: list[PolicyDemand], reasons: dict[str, str], words: str
) -> None:
    joined = join(WHERE, asks)
    assert {p: v.reason for p, v in joined.verdicts.items()} == reasons
    first = joined.verdicts[sorted(reasons)[0]]
    assert first.state == "stalled" and words in first.message, first.message


def test_a_persons_entry_for_an_unknown_chip_is_enough() -> None:
    assert join(WHERE, [ask("a", chips=("910Z9",))], present={"910Z9"}).verdicts == {}


@pytest.mark.parametrize(
    ("asks", "held", "core", "nvidia"),
    [
        ([ask("a", soft=True), ask("b", soft=False)], {"hamiVnpuCore"}, None, {}),
        ([ask("a", core=HamiCore(device_split_count=4)), ask("b", core=HamiCore())],
         {"nvidia"}, True, {}),
        ([ask("a", core=HamiCore(mode="MIG"))], set(), True, {}),  # MIG has no scalings
    ],
)  # fmt: skip
def test_disputed_fields_are_held(
    asks: list[PolicyDemand], held: set[str], core: bool | None, nvidia: dict[str, Any]
) -> None:
    joined = join(WHERE, asks)
    assert joined.want is not None
    assert set(joined.want.held) == held
    assert joined.want.hami_vnpu_core is core and dict(joined.want.nvidia) == nvidia
