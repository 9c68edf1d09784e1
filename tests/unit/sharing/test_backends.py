"""The backend and Ascend-mode tables: every rule drawn from their rows, the old boolean read."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from tessera.api.v1alpha1 import backends, rules
from tessera.api.v1alpha1.backends import ASCEND_MODES, BACKENDS
from tessera.api.v1alpha1.sharingpolicy import (
    ASCEND_MODE_AND_SOFT_SLICING,
    AscendSharing,
    SharingPolicySpec,
)


def test_every_backend_and_mode_has_exactly_one_row() -> None:
    assert set(get_args(backends.Backend)) == set(BACKENDS)
    assert set(get_args(backends.AscendMode)) == set(ASCEND_MODES)
    served = {mode for mode, row in ASCEND_MODES.items() if row.served}
    assert set(get_args(backends.ServedAscendMode)) == served


def test_the_rows_give_the_blocks_the_dra_forms_and_the_pool_kinds() -> None:
    assert backends.blocks() == (
        ("timeSlicing", "TimeSlicing"),
        ("mps", "MPS"),
        ("hamiCore", "HAMiCore"),
    )
    assert backends.dra_blocks() == (("timeSlicing", "TimeSlicing"), ("mps", "MPS"))
    assert backends.not_dra() == ("HAMiCore",)
    assert [b for b, row in BACKENDS.items() if "DRA" not in row.pools] == ["HAMiCore"]
    assert backends.block_of("MPS") == "mps" and backends.block_of("Exclusive") == ""
    assert backends.block_of("Magic") == ""


def _rules() -> list[dict[str, str]]:
    schema = SharingPolicySpec.model_json_schema()
    found: list[dict[str, str]] = schema["x-kubernetes-validations"]
    return found


def test_the_crd_has_one_block_rule_per_block_and_one_dra_rule_per_dra_form() -> None:
    text = [r["rule"] for r in _rules()]
    for block, backend in backends.blocks():
        assert sum(f"has(self.{block}) == (self.backend == '{backend}')" in t for t in text) == 1
    for block, backend in backends.dra_blocks():
        assert f"!has(self.dra) || !has(self.dra.{block}) || self.backend == '{backend}'" in text
    for backend in backends.not_dra():
        assert f"!has(self.dra) || self.backend != '{backend}'" in text


def test_plan_knows_every_message_the_table_generates() -> None:
    generated = {r["message"] for r in _rules()}
    assert generated <= rules.messages()
    assert ASCEND_MODE_AND_SOFT_SLICING in rules.messages()


@pytest.mark.parametrize(
    ("ascend", "mode", "soft"),
    [
        pytest.param({}, "Templates", False, id="nothing-set"),
        pytest.param({"softSlicing": True}, "HAMiCore", True, id="old-boolean-true"),
        pytest.param({"softSlicing": False}, "Templates", False, id="old-boolean-false"),
        pytest.param({"mode": "HAMiCore"}, "HAMiCore", True, id="mode"),
        pytest.param({"mode": "Templates"}, "Templates", False, id="mode-templates"),
        pytest.param({"mode": "HAMiCore", "softSlicing": True}, "HAMiCore", True, id="both-agree"),
    ],
)
def test_the_mode_is_read_one_way(ascend: dict[str, Any], mode: str, soft: bool) -> None:
    parsed = AscendSharing.model_validate(ascend)
    assert (parsed.effective_mode, parsed.soft) == (mode, soft)


@pytest.mark.parametrize(
    ("ascend", "broken"),
    [
        pytest.param({"mode": "Templates", "softSlicing": True}, True, id="templates-but-soft"),
        pytest.param({"mode": "HAMiCore", "softSlicing": False}, True, id="hami-but-not-soft"),
        pytest.param({"mode": "HAMiCore", "softSlicing": True}, False, id="agree"),
        pytest.param({"softSlicing": True}, False, id="old-spelling-alone"),
        pytest.param({"mode": "Templates"}, False, id="new-spelling-alone"),
    ],
)
def test_tessera_plan_refuses_a_mode_and_boolean_that_disagree(
    ascend: dict[str, Any], broken: bool
) -> None:
    spec = {"nodeSelector": {}, "backend": "Exclusive", "ascend": ascend}
    found = rules.first_broken("SharingPolicy", spec)
    assert found == (("ascend.softSlicing", ASCEND_MODE_AND_SOFT_SLICING) if broken else None)


def test_a_mode_not_served_yet_is_refused_by_the_schema() -> None:
    for mode, row in ASCEND_MODES.items():
        if not row.served:
            with pytest.raises(ValueError, match="mode"):
                AscendSharing.model_validate({"mode": mode})
