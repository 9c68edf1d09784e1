"""HAMi's vnpus entries: HAMi's shipped values per version, found by any chip name."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from devcluster.scheduler_texts import HAMI_VNPUS_CONFIG
from tessera.domain.geometry.ascend import chips
from tessera.domain.schedulers import vnpus
from tessera.domain.schedulers.versions import Version

V2_10, V2_9, V2_8, V2_7 = Version(2, 10), Version(2, 9), Version(2, 8), Version(2, 7)
# the 310P3 entry of HAMi v2.10's chart (docs/facts/hami.md §HAMi's scheduler device config),
# as the stand-in HAMi install writes it
REFERENCE_310P3 = yaml.safe_load(HAMI_VNPUS_CONFIG)["vnpus"]["configs"][0]


@pytest.mark.parametrize(
    ("name", "chip"),
    [
        ("310P3", "310P3"),
        ("Ascend310P3", "310P3"),  # a catalog alias
        ("ascend310p", "310P3"),
        ("910B4", "910B4"),
        ("Ascend910B4-1", "910B4-1"),
        ("910B3", "910B3"),  # not in the catalog, shipped by HAMi
        ("Ascend910", "Ascend910"),  # the 910C
        ("910Z9", None),
    ],
)
def test_hami_chip(name: str, chip: str | None) -> None:
    assert vnpus.hami_chip(name) == chip


def test_the_310p3_entry_is_the_one_hami_ships() -> None:
    assert vnpus.entry("310P3", V2_10) == REFERENCE_310P3
    assert list(vnpus.entry("310P3", V2_10) or {}) == list(REFERENCE_310P3)  # in HAMi's order


@pytest.mark.parametrize(
    ("chip", "version", "check"),
    [
        # chip, HAMi version, what its entry holds then
        ("310P3", V2_8, lambda e: "resourceCoreName" not in e),  # no hami-core before v2.9
        ("310P3", V2_9, lambda e: e["resourceCoreName"] == "huawei.com/Ascend310P-core"),
        ("910B4-1", V2_10, lambda e: _names(e) == ["vir05_1c_16g", "vir10_3c_32g"]),
        ("910B4-1", V2_9, lambda e: _templates(e) == [("vir05_1c_8g", 16384), ("vir10_3c_16g", 32768)]),
        ("910B4-1", V2_7, lambda e: _templates(e) == [("vir05_1c_8g", 8192), ("vir10_3c_16g", 16384)]),
        ("Ascend910", V2_9, lambda e: "templates" not in e and "superPod" not in e),
        ("Ascend910", V2_10, lambda e: e["superPod"] is True and "memoryFactor" not in e),
        ("910A", V2_10, lambda e: "aiCPU" not in e and "aiCPU" not in e["templates"][0]),
    ],
)  # fmt: skip
def test_entries_follow_the_hami_version(chip: str, version: Version, check: Any) -> None:
    found = vnpus.entry(chip, version)
    assert found is not None and check(found), found


@pytest.mark.parametrize(
    ("chip", "version"),
    [("Ascend910", V2_8), ("310P3", Version(2, 6)), ("910Z9", V2_10)],
)
def test_no_entry_where_hami_ships_none(chip: str, version: Version) -> None:
    assert vnpus.entry(chip, version) is None


def test_the_catalog_and_hamis_values_agree() -> None:
    """Chips Tessera's catalog knows: HAMi's templates are the catalog's, number for number."""
    for chip in chips():
        name = vnpus.hami_chip(chip.chip)
        assert name is not None, chip.chip
        entry = vnpus.entry(name, V2_10) or {}
        assert (entry["aiCore"], entry["aiCPU"]) == (chip.ai_core, chip.ai_cpu)
        for template in entry["templates"]:
            known = chip.by_name[template["name"]]
            found = (template["memory"], template["aiCore"], template["aiCPU"])
            assert found == (known.memory_mb, known.ai_core, known.ai_cpu), template


@pytest.mark.parametrize(
    ("version", "core", "shape"),
    [
        (V2_8, True, [{"chipName": "x"}]),  # the list form has no hamiVnpuCore
        (V2_9, True, {"hamiVnpuCore": True, "configs": [{"chipName": "x"}]}),
        (V2_10, None, {"configs": [{"chipName": "x"}]}),
    ],
)
def test_section_shape(version: Version, core: bool | None, shape: Any) -> None:
    assert vnpus.section([{"chipName": "x"}], version, core) == shape


def _names(entry: dict[str, Any]) -> list[str]:
    return [t["name"] for t in entry["templates"]]


def _templates(entry: dict[str, Any]) -> list[tuple[str, int]]:
    return [(t["name"], t["memory"]) for t in entry["templates"]]
