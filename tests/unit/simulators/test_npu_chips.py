"""The simulated npu-smi and Ascend device plugin answer from their own chip table
(devcluster/npu_chips.yaml), which must agree with Tessera's catalog — two independent sources."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from devcluster import fake_npu_smi, hardware, npunode
from tessera.domain.geometry import ascend, device_share


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


def _run(script: Path, argv: list[str], answer: str = "") -> tuple[int, str]:
    done = subprocess.run([str(script), *argv], input=answer, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def test_device_share_is_switched_confirmed_and_read_back_in_tesseras_words(
    tmp_path: Path,
) -> None:
    script = fake_npu_smi.install(tmp_path, "910B4")
    rc, said = _run(script, device_share.info_command(1))
    assert rc == 0 and device_share.parse_status(said) is False
    (on,) = device_share.set_commands(1, "on")
    rc, said = _run(script, on)  # no answer to npu-smi's prompt: nothing changes
    assert rc == 1 and "cancelled" in said
    rc, said = _run(script, on, device_share.CONFIRM)
    assert rc == 0 and "set successfully" in said
    assert device_share.parse_status(_run(script, device_share.info_command(0))[1]) is True
    state = json.loads((tmp_path / "state.json").read_text())
    chip = hardware.npu_chip("910B4")
    # the device-plugin stand-in: a shared NPU is 100 units, the other one whole
    assert npunode.advertised(chip, 2, state) == {"huawei.com/Ascend910": 101}
    (off,) = device_share.set_commands(1, "off")
    assert _run(script, off, device_share.CONFIRM)[0] == 0
    assert device_share.parse_status(_run(script, device_share.info_command(0))[1]) is False


def test_npu_smi_refuses_device_share_on_a_chip_its_table_does_not_mark(tmp_path: Path) -> None:
    script = fake_npu_smi.install(tmp_path, "310P3")
    (on,) = device_share.set_commands(1, "on")
    rc, said = _run(script, on, device_share.CONFIRM)
    assert rc == 1 and "does not support" in said
