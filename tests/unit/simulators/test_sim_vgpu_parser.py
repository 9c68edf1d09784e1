"""The simulated vGPU Device Manager parses its config as strictly as the real one (vgpu.md §1.1).

Each refusal carries the device manager's own message; what its parser lets through (a type the
board lacks, mixed sizes, a count too high) is left to the node (test_vgpu_boards).
"""

from __future__ import annotations

import pytest
import yaml

from devcluster.vgpuconfig import VgpuError, config, parse_type

GOOD = {"devices": "all", "vgpu-devices": {"A100D-20C": 4}}


def doc(*specs: object, top: dict[str, object] | None = None) -> str:
    return yaml.safe_dump({"version": "v1", "vgpu-configs": {"c": list(specs)}, **(top or {})})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            yaml.safe_dump({"vgpu-configs": {"c": [GOOD]}}),
            "unable to parse with missing 'version' field",
        ),
        (yaml.safe_dump({"version": "v2", "vgpu-configs": {"c": [GOOD]}}), "unknown version: v2"),
        (doc(GOOD, top={"mig-configs": {}}), "unexpected field: mig-configs"),
        (
            yaml.safe_dump({"version": "v1", "vgpu-configs": {}}),
            "at least one entry in 'vgpu-configs' is required",
        ),
        (
            yaml.safe_dump({"version": "v1", "vgpu-configs": {"c": []}}),
            "at least one entry in 'c' is required",
        ),
        (doc({"vgpu-devices": {"A100D-20C": 4}}), "missing required field: devices"),
        (doc({"devices": "all"}), "missing required field: vgpu-devices"),
        (doc({**GOOD, "mig-enabled": False}), "unexpected field: mig-enabled"),
        (doc({**GOOD, "devices": "some"}), "invalid string input for 'devices': some"),
        (
            doc({"devices": "all", "vgpu-devices": {"A100D-20": 4}}),
            "invalid format for 'A100D-20': malformed vGPU type string 'A100D-20'",
        ),
        (
            doc({"devices": "all", "vgpu-devices": {"A100D-20X": 4}}),
            "malformed vGPU type string 'A100D-20X'",
        ),
        (doc({"devices": "all", "vgpu-devices": {"A100D-20C": 0}}), "invalid count for '0'"),
        (
            doc({"devices": "all", "vgpu-devices": {"A100D-20C": 1, "A100D-1-10C": 1}}),
            "cannot mix time-sliced and MIG-backed vGPU devices on the same GPU",
        ),
        (doc(GOOD), "selected vgpu-config not present: other"),
    ],
)
def test_what_the_device_manager_refuses_with_its_own_message(text: str, message: str) -> None:
    name = "other" if "not present" in message else "c"
    with pytest.raises(VgpuError) as err:
        config(text, name)
    assert message in str(err.value)


def test_what_it_accepts_filters_indices_and_an_empty_map() -> None:
    text = doc(
        {"device-filter": "0x20B510DE", "devices": [0, 1], "vgpu-devices": {"A100D-20C": 4}},
        {"device-filter": ["0x233110DE", "0x20B510DE"], "devices": "all", "vgpu-devices": {}},
    )
    first, second = config(text, "c")
    assert first.matches(1, 0x20B510DE) and not first.matches(2, 0x20B510DE)
    assert not first.matches(0, 0x233010DE)
    assert second.matches(7, 0x233110DE) and dict(second.vgpu_devices) == {}


@pytest.mark.parametrize(
    ("name", "mig", "gb", "attr"),
    [
        ("A100D-20C", False, 20, ""),
        ("RTX6000-Ada-24Q", False, 24, ""),
        ("M60-0Q", False, 0, ""),
        ("A100-1-5C", True, 5, ""),
        ("A100-1-5CME", True, 5, "ME"),
        ("DC-1-24CGFX", True, 24, "GFX"),
    ],
)
def test_both_type_grammars(name: str, mig: bool, gb: int, attr: str) -> None:
    parsed = parse_type(name)
    assert (parsed.mig, parsed.gb, parsed.attr) == (mig, gb, attr)
