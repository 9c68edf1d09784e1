"""The simulated npu-smi and Ascend device plugin answer from their own chip table
(devcluster/npu_chips.yaml), which must agree with Tessera's catalog — two independent sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devcluster import fake_npu_smi, hardware, npunode
from tessera.domain.geometry import ascend


@pytest.mark.parametrize("name", ["310P3", "910B4", "910B4-1"])
def test_the_chip_table_agrees_with_tessera_on_every_template(name: str) -> None:
    chip, theirs = hardware.npu_chip(name), ascend.resolve_chip(name)
    assert (chip.ai_core, chip.whole_resource) == (theirs.ai_core, theirs.whole_resource)
    assert {n: (t.ai_core, t.resource) for n, t in chip.templates.items()} == {
        t.name: (t.ai_core, t.resource) for t in theirs.templates
    }


def test_names_resolve_and_unknown_chips_say_so() -> None:
    assert hardware.npu_chip("Ascend310P3") is hardware.npu_chip("310P3")
    assert hardware.is_npu("Ascend910B4") and not hardware.is_npu("H100-80GB")
    with pytest.raises(hardware.UnknownHardwareError, match="no NPU chip 'Ascend999'"):
        hardware.npu_chip("Ascend999")


def _smi(state: Path, *argv: str) -> int:
    return fake_npu_smi.main(["--state", str(state), "set", "-t", *argv])


def test_npu_smi_refuses_what_the_chip_cannot_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_NPU_SMI_CHIP", "Ascend310P3")
    state = tmp_path / "state.json"
    create = ("create-vnpu", "-i", "0", "-c", "0", "-f")
    assert _smi(state, *create, "vir04", "-v", "100") == 0
    assert _smi(state, *create, "vir02", "-v", "101") == 0
    assert _smi(state, *create, "vir04", "-v", "102") == 1  # 4 + 2 + 4 > 8 AI cores
    assert _smi(state, *create, "vir02", "-v", "101") == 1  # the id is taken
    assert _smi(state, *create, "vir10_3c_16g", "-v", "103") == 1  # a 910B4 template
    assert "template vir10_3c_16g not supported" in capsys.readouterr().out
    assert _smi(state, *create, "vir02_1c", "-v", "104") == 0  # exactly 8 cores
    assert _smi(state, "destroy-vnpu", "-i", "0", "-c", "0", "-v", "100") == 0
    created = json.loads(state.read_text())
    chip = hardware.npu_chip("310P3")
    assert npunode.advertised(chip, 2, created) == {
        "huawei.com/Ascend310P-2c": 1,
        "huawei.com/Ascend310P-2c.1cpu": 1,
        "huawei.com/Ascend310P": 1,  # the second NPU is whole
    }
