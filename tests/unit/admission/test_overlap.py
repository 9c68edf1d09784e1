"""Two policies' pod contracts contradicting each other on the resources both guard."""

from __future__ import annotations

from typing import Any

import pytest

from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain import admission
from tessera.domain.admission import Contract
from tessera.domain.base.conditions import Verdict

SELECT = {"nodeSelector": {"matchLabels": {"pool": "p"}}}
VOLCANO = {"name": "Volcano", "volcano": {}}
HAMI = {"name": "HAMi"}


def contract(name: str, chips: tuple[str, ...] = ("310P3",), **fields: Any) -> Contract:
    base: dict[str, Any] = {**SELECT, "backend": "Exclusive", "ascend": {"softSlicing": True}}
    base.update(fields)
    found = admission.contract_of(name, SharingPolicySpec.model_validate(base), chips)
    assert found is not None
    return found


def gpu(name: str, scheduler: dict[str, Any]) -> Contract:
    return contract(name, (), backend="HAMiCore", ascend=None, scheduler=scheduler)


@pytest.mark.parametrize(
    ("a", "b", "differences"),
    [
        pytest.param(
            contract("a", scheduler=HAMI),
            contract("b", scheduler=VOLCANO),
            ("schedulerName hami-scheduler here, volcano there",),
            id="hami-vs-volcano",
        ),
        pytest.param(
            contract("a", scheduler=VOLCANO),
            contract("b", scheduler=VOLCANO, ascend={"softSlicing": False}),
            (
                "annotation huawei.com/vnpu-mode: hami-core on every pod (soft slicing on) "
                "here, with a -core request only there",
            ),
            id="soft-on-vs-off",
        ),
        pytest.param(
            contract("a", scheduler=HAMI, ascend={"softSlicing": False}),
            contract("b", scheduler=VOLCANO),
            (
                "schedulerName hami-scheduler here, volcano there",
                "annotation huawei.com/vnpu-mode: hami-core with a -core request only here, "
                "on every pod (soft slicing on) there",
            ),
            id="both-differ",
        ),
        pytest.param(
            contract("a", ("910B4",), scheduler=HAMI),
            contract("b", (), scheduler=VOLCANO),  # no chip known: guards every HAMi chip
            ("schedulerName hami-scheduler here, volcano there",),
            id="unknown-chips-guard-all",
        ),
    ],
)
def test_contradicting_contracts_stall_both_naming_the_other(
    a: Contract, b: Contract, differences: tuple[str, ...]
) -> None:
    found = admission.overlaps([b, a])
    assert set(found) == {"a", "b"}
    [mine], [theirs] = found["a"], found["b"]
    assert (mine.other, theirs.other) == ("b", "a")
    assert mine.resources == theirs.resources and set(mine.resources) <= set(a.resources)
    assert mine.differences == differences
    assert len(theirs.differences) == len(differences)


@pytest.mark.parametrize(
    ("contracts"),
    [
        pytest.param(
            [contract("a", scheduler=HAMI), contract("b", scheduler=HAMI)], id="same-pieces"
        ),
        pytest.param(
            [
                contract("a", scheduler={**HAMI, "podContract": "Deny"}),
                contract("b", scheduler=HAMI),
            ],
            id="warn-vs-deny-agree",
        ),
        pytest.param(
            [
                contract("a", ("310P3",), scheduler=HAMI),
                contract("b", ("910B4",), scheduler=VOLCANO),
            ],
            id="other-chips",
        ),
        pytest.param([gpu("a", HAMI), gpu("b", VOLCANO)], id="gpu-resources-differ-by-scheduler"),
        pytest.param([contract("a", scheduler=HAMI)], id="alone"),
    ],
)
def test_contracts_that_agree_or_do_not_meet_stand(contracts: list[Contract]) -> None:
    assert admission.overlaps(contracts) == {}


def test_one_policy_against_two_others_names_both() -> None:
    found = admission.overlaps(
        [
            contract("a", scheduler=HAMI),
            contract("b", scheduler=VOLCANO),
            contract("c", scheduler=VOLCANO, ascend={"softSlicing": False}),
        ]
    )
    assert [o.other for o in found["a"]] == ["b", "c"]
    assert [o.other for o in found["b"]] == ["a", "c"]
    text = admission.overlap_message("SharingPolicy/a", found["a"])
    assert "SharingPolicy b guards huawei.com/Ascend310P" in text
    assert "SharingPolicy c guards" in text and "neither is enforced" in text


@pytest.mark.parametrize(
    ("base", "reason"),
    [
        (Verdict("ready", "Applied", "ok"), "Conflict"),
        (Verdict("reconciling", "WaitingForScheduler", "no HAMi"), "Conflict"),
        (Verdict("stalled", "InvalidSpec", "bad"), "InvalidSpec"),  # keeps its reason, says both
    ],
)
def test_an_overlap_stalls_the_verdict(base: Verdict, reason: str) -> None:
    found = admission.overlaps([contract("a", scheduler=HAMI), contract("b", scheduler=VOLCANO)])
    stalled = admission.with_overlaps(base, found["a"], "SharingPolicy/a")
    assert (stalled.state, stalled.reason) == ("stalled", reason)
    assert "SharingPolicy b guards" in stalled.message
    assert admission.with_overlaps(base, (), "SharingPolicy/a") == base
