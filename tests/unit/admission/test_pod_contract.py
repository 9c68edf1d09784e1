"""A policy's pod contract: which resources are guarded and which pieces are checked."""

from __future__ import annotations

from typing import Any

import pytest

from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain import admission
from tessera.domain.admission import cel
from tessera.domain.geometry import ascend

SELECT = {"nodeSelector": {"matchLabels": {"pool": "p"}}}
VOLCANO = {"name": "Volcano", "volcano": {}}
HAMI = {"name": "HAMi"}


def spec(**fields: Any) -> SharingPolicySpec:
    base: dict[str, Any] = {**SELECT, "backend": "Exclusive", "ascend": {"softSlicing": True}}
    base.update(fields)
    return SharingPolicySpec.model_validate(base)


ASC_310P = ("huawei.com/Ascend310P", "huawei.com/Ascend310P-memory", "huawei.com/Ascend310P-core")


@pytest.mark.parametrize(
    ("fields", "chips", "scheduler", "resources", "soft"),
    [
        pytest.param(
            {"scheduler": VOLCANO}, ["310P3"], "volcano", ASC_310P, True, id="310p-volcano"
        ),
        pytest.param(
            {"scheduler": HAMI, "ascend": {"softSlicing": False}},
            ["Ascend310P3", "310P3"],
            "hami-scheduler",
            ASC_310P,
            False,
            id="alias-once-hard-slicing",
        ),
        pytest.param(
            {"scheduler": HAMI},
            ["910B4-1", "910B4"],
            "hami-scheduler",
            (
                "huawei.com/Ascend910B4",
                "huawei.com/Ascend910B4-1",
                "huawei.com/Ascend910B4-memory",
                "huawei.com/Ascend910B4-1-memory",
                "huawei.com/Ascend910B4-core",
                "huawei.com/Ascend910B4-1-core",
            ),
            True,
            id="two-chips",
        ),
        pytest.param(
            {"scheduler": VOLCANO, "backend": "HAMiCore", "ascend": None},
            [],
            "volcano",
            admission.contract.VOLCANO_GPU_RESOURCES,
            None,
            id="nvidia-volcano-vgpu",
        ),
        pytest.param(
            {"scheduler": HAMI, "backend": "HAMiCore", "ascend": None},
            [],
            "hami-scheduler",
            ("nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"),
            None,
            id="nvidia-hami-no-bare-gpu",
        ),
    ],
)
def test_contract_of(
    fields: dict[str, Any],
    chips: list[str],
    scheduler: str,
    resources: tuple[str, ...],
    soft: bool | None,
) -> None:
    found = admission.contract_of("p", spec(**fields), chips)
    assert found is not None
    assert found.scheduler == scheduler
    assert sorted(found.resources) == sorted(resources)
    assert (found.ascend.soft if found.ascend else None) == soft


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="no-scheduler"),
        pytest.param({"scheduler": {**VOLCANO, "podContract": "Off"}}, id="off"),
    ],
)
def test_no_contract(fields: dict[str, Any]) -> None:
    assert admission.contract_of("p", spec(**fields), ["310P3"]) is None


def test_no_known_chip_guards_every_chip_hami_ships() -> None:
    found = admission.contract_of("p", spec(scheduler=VOLCANO), ["Ascend999", "", "nonsense"])
    assert found is not None and found.ascend is not None and found.ascend.assumed
    assert {c.chip for c in ascend.chips()} <= set(found.ascend.chips)
    assert set(found.ascend.counts) == {
        f"huawei.com/{w}"
        for w in (
            "Ascend910A", "Ascend910B2", "Ascend910B3", "Ascend910B4-1", "Ascend910B4",
            "Ascend310P", "Ascend910C",
        )
    }  # fmt: skip


def test_a_chip_hami_ships_but_tessera_does_not_split_is_guarded() -> None:
    found = admission.contract_of("p", spec(scheduler=VOLCANO), ["910B3", "Ascend910"])
    assert found is not None and found.ascend is not None and not found.ascend.assumed
    assert found.ascend.counts == ("huawei.com/Ascend910B3", "huawei.com/Ascend910C")


@pytest.mark.parametrize(
    ("fields", "pieces"),
    [
        pytest.param(
            {"scheduler": VOLCANO},
            ["schedulerName", "runtimeClassName", "vnpu-mode", "Ascend310P-memory"],
            id="soft: annotation always",
        ),
        pytest.param(
            {"scheduler": VOLCANO, "ascend": {"softSlicing": False}},
            ["schedulerName", "runtimeClassName", "-core request", "Ascend310P-memory"],
            id="hard: annotation for -core only",
        ),
        pytest.param(
            {"scheduler": HAMI, "backend": "HAMiCore", "ascend": None},
            ["schedulerName"],
            id="nvidia: scheduler only",
        ),
    ],
)
def test_one_validation_per_piece_each_naming_it(fields: dict[str, Any], pieces: list[str]) -> None:
    found = admission.contract_of("p", spec(**fields), ["310P3"])
    assert found is not None
    checks = cel.validations(found)
    assert len(checks) == len(pieces)
    for check, piece in zip(checks, pieces, strict=True):
        assert piece in check["messageExpression"]
        assert check["reason"] == "Invalid"


def test_manifests_are_tesseras_own_and_bound_with_the_action() -> None:
    found = admission.contract_of(
        "asc", spec(scheduler={**VOLCANO, "podContract": "Deny"}), ["310P3"]
    )
    assert found is not None
    vap, bound = admission.policy(found), admission.binding(found)
    assert vap["metadata"]["name"] == bound["spec"]["policyName"] == "asc.pod-contract.tessera.io"
    for obj in (vap, bound):
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "tessera"}
        assert obj["metadata"]["annotations"] == {"tessera.io/declared-by": "SharingPolicy/asc"}
    assert bound["spec"]["validationActions"] == ["Deny"]
    rules = vap["spec"]["matchConstraints"]["resourceRules"]
    assert rules[0]["resources"] == ["pods"] and rules[0]["operations"] == ["CREATE"]
    condition = vap["spec"]["matchConditions"][0]["expression"]
    assert all(f"'{r}'" in condition for r in found.resources)


def test_a_long_name_keeps_a_hash_within_the_limit() -> None:
    long_a, long_b = "a" * 240, "a" * 239 + "b"
    assert len(admission.name_of(long_a)) <= 253
    assert admission.name_of(long_a) != admission.name_of(long_b)


@pytest.mark.parametrize(
    ("text", "literal"),
    [("it's", '"it\'s"'), ('say "hi"', '"say \\"hi\\""'), ("a\\b", '"a\\\\b"')],
)
def test_messages_are_cel_string_literals(text: str, literal: str) -> None:
    assert cel.lit(text) == literal


def test_a_mindcluster_policy_guards_npu_core_with_its_labels_and_counts() -> None:
    mc = spec(ascend={"mode": "MindCluster"}, scheduler=VOLCANO)
    found = admission.contract_of("mc", mc, ["310P3"])
    assert found is not None and found.mindcluster and found.ascend is None
    assert found.resources == ("huawei.com/npu-core",)
    checks = cel.validations(found)
    texts = [v["messageExpression"] for v in checks]
    assert any("label ring-controller.atlas is " in t and "ascend-310P" in t for t in texts)
    assert any("need label vnpu-level: low or high" in t for t in texts)
    assert any("label vnpu-dvpp must be yes, no, null or unset" in t for t in texts)
    assert any("takes 1, 2, 4 or a multiple of 8" in t for t in texts)
    assert not any("runtimeClassName" in t or "hami-core" in t for t in texts)
    assert "huawei.com/npu-core" in cel.match_condition(found)["expression"]
    assert "label vnpu-level: low or high" in cel.summary(found)


def test_a_vcannrt_policy_guards_pods_carrying_the_soft_share_labels() -> None:
    vc = spec(ascend={"mode": "VCannRT"}, scheduler=VOLCANO)
    found = admission.contract_of("vc", vc, ["910B4"])
    assert found is not None and found.vcannrt and found.ascend is None and not found.mindcluster
    assert found.resources == ()  # huawei.com/Ascend910 also names whole NPUs elsewhere
    condition = cel.match_condition(found)["expression"]
    assert "huawei.com/scheduler.softShareDev.aicoreQuota" in condition
    texts = [v["messageExpression"] for v in cel.validations(found)]
    assert any("aicoreQuota is " in t and "1 to 100" in t for t in texts)
    assert any("hbmQuota is " in t and "in MB, at least 1" in t for t in texts)
    assert any("policy is " in t and "fixed-share, elastic, best-effort" in t for t in texts)
    assert any("equal to label huawei.com/scheduler.softShareDev.aicoreQuota" in t for t in texts)
    assert any("does not support privileged containers" in t for t in texts)
    assert not any("runtimeClassName" in t or "vnpu-level" in t for t in texts)
