import pytest
import yaml
from geometry_builders import vnpu

from tessera.domain.geometry import ascend
from tessera.domain.geometry import vnpu as vnpu_mod
from tessera.domain.geometry.layouts import GeometryError


@pytest.mark.parametrize(
    ("chip", "templates", "valid", "phrase"),
    [
        ("310P3", {"vir04": 1, "vir04_3c": 1}, True, "8 of 8 AI cores"),  # recommended combination
        ("310P3", {"vir04": 1, "vir02": 1, "vir02_1c": 1}, True, "8 of 8 AI cores"),
        ("310P3", {"vir01": 6, "vir02_1c": 1}, True, "8 of 8"),
        ("310P3", {"vir01": 7}, True, "7 of 8"),
        ("310P3", {"vir01": 8}, False, "8 AI CPUs, the chip has 7"),
        ("310P3", {"vir02": 4}, False, "Fits instead: vir02 x3"),
        ("310P3", {"vir04": 1, "vir02": 2}, False, "8 AI CPUs"),
        ("310P3", {"vir04": 3}, False, "12 AI cores"),
        ("310P3", {"vir04_4c_dvpp": 1, "vir04_3c_ndvpp": 1}, True, "8 of 8"),
        ("310P3", {"vir04_4c_dvpp": 2}, False, "reserve every DVPP module"),
        ("310P3", {"vir02_1c": 3, "vir01": 2}, True, "8 of 8"),
        ("310P3", {"vir02_1c": 4, "vir01": 1}, False, "5 vGroups"),
        ("310P3", {"vir05_1c_8g": 1}, False, "310P3 has no template vir05_1c_8g"),
        ("910B4", {"vir05_1c_8g": 4}, True, "20 of 20"),
        ("910B4", {"vir10_3c_16g": 2}, True, "20 of 20"),
        ("910B4", {"vir10_3c_16g": 1, "vir05_1c_8g": 2}, True, "20 of 20"),
        ("910B4", {"vir10_4c_16g_m": 2}, False, "8 AI CPUs"),
        ("910B4", {"vir10_3c_16g": 2, "vir05_1c_8g": 1}, False, "25 AI cores"),
        ("910B4-1", {"vir10_3c_32g": 2}, True, "20 of 20"),
        ("910B4-1", {"vir10_3c_16g": 1}, False, "no template vir10_3c_16g"),
        ("310P3", {}, True, "used whole"),
    ],
)
def test_template_combinations(
    chip: str, templates: dict[str, int], valid: bool, phrase: str
) -> None:
    verdict = ascend.check_templates(ascend.resolve_chip(chip), templates)
    assert verdict.valid is valid
    assert phrase in verdict.reason, verdict.reason


def test_creation_order_is_biggest_first_with_vgroups_on_310p() -> None:
    verdict = ascend.check_templates(ascend.resolve_chip("310P3"), {"vir01": 3, "vir04": 1})
    assert [(i.template, i.vgroup) for i in verdict.instances] == [
        ("vir04", 0),
        ("vir01", 1),
        ("vir01", 1),
        ("vir01", 2),
    ]
    b4 = ascend.check_templates(ascend.resolve_chip("910B4"), {"vir05_1c_8g": 2, "vir10_3c_16g": 1})
    assert [(i.template, i.vgroup) for i in b4.instances] == [
        ("vir10_3c_16g", None),
        ("vir05_1c_8g", None),
        ("vir05_1c_8g", None),
    ]


@pytest.mark.parametrize(
    ("name", "want"), [("310P3", "310P3"), ("ascend910b4", "910B4"), ("Ascend910B4-1", "910B4-1")]
)
def test_resolve_chip(name: str, want: str) -> None:
    assert ascend.resolve_chip(name).chip == want


def test_unknown_chip_lists_known_ones() -> None:
    with pytest.raises(ascend.UnknownChipError, match="310P3, 910B4, 910B4-1"):
        ascend.resolve_chip("910C")


def test_unknowns_are_marked_not_guessed() -> None:
    chip = ascend.resolve_chip("310P3")
    assert chip.by_name["vir04_3c"].memory_mb is None
    assert ascend.resolve_chip("910B4").max_instances is None


@pytest.mark.parametrize(
    ("layouts", "count", "want"),
    [
        (
            [vnpu("all", {"vir04": 1, "vir04_3c": 1}), vnpu([3])],
            4,
            {
                "huawei.com/Ascend310P": 1,
                "huawei.com/Ascend310P-4c": 3,
                "huawei.com/Ascend310P-4c.3cpu": 3,
            },
        ),
        (
            [vnpu("all", {"vir02_1c": 2, "vir02": 2})],
            2,
            {"huawei.com/Ascend310P-2c": 4, "huawei.com/Ascend310P-2c.1cpu": 4},
        ),
        ([vnpu("all")], 8, {"huawei.com/Ascend310P": 8}),
    ],
)
def test_vnpu_capacity_uses_static_vnpu_resource_names(
    layouts: list, count: int, want: dict[str, int]
) -> None:
    assert vnpu_mod.vnpu_capacity(ascend.resolve_chip("310P3"), count, layouts) == want


def test_vnpu_node_reason_names_the_npus() -> None:
    chip = ascend.resolve_chip("310P3")
    layouts = [vnpu("all", {"vir04": 1}), vnpu([1, 2], {"vir04": 1, "vir02": 2})]
    verdict = vnpu_mod.validate_vnpu_node(chip, 4, layouts)
    assert not verdict.valid and verdict.reason.startswith("NPU 1-2 (310P3): ")
    with pytest.raises(GeometryError, match="NPU 1-2"):
        vnpu_mod.vnpu_capacity(chip, 4, layouts)


def test_vnpu_render_names_by_content_and_lists_creation_order() -> None:
    chip = ascend.resolve_chip("310P3")
    a = [vnpu("all", {"vir04": 1, "vir02_1c": 2})]
    b = [vnpu("all"), vnpu([0], {"vir01": 2})]
    rendered = vnpu_mod.render_vnpu_config("npu-pool", [a, b, a], [chip])
    assert rendered.names[0] == rendered.names[2] != rendered.names[1]
    assert rendered.names[0].startswith("tessera-npu-pool-")
    doc = yaml.safe_load(rendered.data["config.yaml"])
    assert doc["version"] == "v1" and set(doc["vnpu-configs"]) == set(rendered.names)
    assert doc["vnpu-configs"][rendered.names[0]] == [
        {
            "devices": "all",
            "vnpu-enabled": True,
            "vnpu-devices": {"vir02_1c": 2, "vir04": 1},
            "create": [
                {"template": "vir04", "vgroup": 0},
                {"template": "vir02_1c", "vgroup": 1},
                {"template": "vir02_1c", "vgroup": 2},
            ],
        }
    ]
    assert doc["vnpu-configs"][rendered.names[1]][0] == {
        "devices": [0],
        "vnpu-enabled": True,
        "vnpu-devices": {"vir01": 2},
        "create": [{"template": "vir01", "vgroup": 0}, {"template": "vir01", "vgroup": 0}],
    }
    assert doc["vnpu-configs"][rendered.names[1]][1]["vnpu-enabled"] is False
    assert rendered.names == vnpu_mod.render_vnpu_config("npu-pool", [a, b, a], []).names


def test_vnpu_render_refuses_a_layout_a_chip_cannot_hold() -> None:
    with pytest.raises(GeometryError, match="on 310P3: vir02 x2 \\+ vir04"):
        vnpu_mod.render_vnpu_config(
            "p", [[vnpu("all", {"vir04": 1, "vir02": 2})]], [ascend.resolve_chip("310P3")]
        )
