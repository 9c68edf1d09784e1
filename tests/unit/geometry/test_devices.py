"""The one `devices` grammar: the parser, the models, the renderers and the CRD pattern agree."""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from geometry_builders import layout, vnpu
from pydantic import ValidationError

from tessera.api.v1alpha1 import devices as grammar
from tessera.api.v1alpha1.nodepoolgeometry import MigGeometry, MigLayout, VnpuGeometry, VnpuLayout
from tessera.domain.geometry import ascend, capacity, catalog, migparted
from tessera.domain.geometry import vnpu as vnpu_mod
from tessera.domain.geometry.layouts import GeometryError, indexes, per_device

TABLE = yaml.safe_load(
    (Path(__file__).parents[2] / "data" / "devices.yaml").read_text(encoding="utf-8")
)
VALID = [
    pytest.param(row["devices"], row["indexes"], id=repr(row["devices"])) for row in TABLE["valid"]
]
INVALID = [
    pytest.param(row["devices"], row["says"], id=repr(row["devices"])) for row in TABLE["invalid"]
]
H100 = catalog.resolve("H100-80GB")


@pytest.mark.parametrize(("devices", "want"), VALID)
def test_valid_forms_parse_everywhere(devices: Any, want: list[int] | None) -> None:
    expected = None if want is None else tuple(want)
    assert grammar.parse(devices) == expected
    assert indexes(devices) == expected  # what the operator and tessera plan use
    assert MigLayout(devices=devices).devices == devices  # kept as written
    assert VnpuLayout.model_validate({"devices": devices}).devices == devices


@pytest.mark.parametrize(("devices", "says"), INVALID)
def test_invalid_forms_are_refused_everywhere_with_the_value(devices: Any, says: str) -> None:
    with pytest.raises(grammar.DevicesError, match=re.escape(says)) as caught:
        grammar.parse(devices)
    assert repr(devices) in str(caught.value) or str(devices) in str(caught.value)
    with pytest.raises(GeometryError, match=re.escape(says)):
        indexes(devices)
    with pytest.raises(ValidationError, match=re.escape(says)):
        MigLayout(devices=devices)
    with pytest.raises(ValidationError, match=re.escape(says)):
        VnpuLayout.model_validate({"devices": devices})


@pytest.mark.parametrize(("devices", "want"), VALID)
def test_the_crd_pattern_admits_every_valid_string(devices: Any, want: list[int] | None) -> None:
    assert re.fullmatch(grammar.PATTERN, str(devices))


@pytest.mark.parametrize(
    ("devices", "says"), [p for p in INVALID if p.values[1] in ("is not", "no spaces")]
)
def test_the_crd_pattern_refuses_what_the_parser_calls_malformed(devices: Any, says: str) -> None:
    assert not re.fullmatch(grammar.PATTERN, str(devices))


def test_a_split_pool_renders_two_mig_parted_entries() -> None:
    split = [layout("0-3", {"3g.40gb": 2}), layout("4-7", {"1g.10gb": 7})]
    rendered = migparted.render_mig_parted("split", [split], [H100])
    doc = yaml.safe_load(rendered.data[migparted.CONFIG_KEY])
    entries = doc["mig-configs"][rendered.names[0]]
    assert entries[0] == {
        "devices": [0, 1, 2, 3],
        "mig-enabled": True,
        "mig-devices": {"3g.40gb": 2},
    }
    assert entries[1] == {
        "devices": [4, 5, 6, 7],
        "mig-enabled": True,
        "mig-devices": {"1g.10gb": 7},
    }
    assert capacity.mig_capacity(H100, 8, split) == {
        "nvidia.com/mig-3g.40gb": 8,
        "nvidia.com/mig-1g.10gb": 28,
    }


def test_equal_index_sets_written_differently_render_the_same_config() -> None:
    ranges = migparted.render_mig_parted("p", [[layout("0-3", {"7g.80gb": 1})]], [H100])
    listed = migparted.render_mig_parted("p", [[layout("3,0,2,1", {"7g.80gb": 1})]], [H100])
    assert ranges.names == listed.names


def test_vnpu_ranges_select_their_npus() -> None:
    layouts = [vnpu("0-1", {"vir04": 1}), vnpu("2,3", {"vir02": 2})]
    entries = vnpu_mod.vnpu_entries(layouts, ascend.resolve_chip("310P3"))
    assert [e["devices"] for e in entries[:2]] == [[0, 1], [2, 3]]


@pytest.mark.parametrize(
    ("first", "second", "index"),
    [("0-3", "3-7", 3), ("0-7", 5, 5), ("0,2,4", "1-2", 2)],
)
def test_overlapping_layouts_of_one_pool_are_refused(first: Any, second: Any, index: int) -> None:
    layouts = [layout(first, {"7g.80gb": 1}), layout(second, {"1g.10gb": 7})]
    verdict = capacity.validate_mig_node(H100, 8, layouts)
    assert not verdict.valid
    assert (
        f"device {index} is listed by layout 1 (devices: {first}) and layout 2 (devices: {second})"
        in verdict.reason
    )
    with pytest.raises(GeometryError, match=f"device {index} is listed"):
        migparted.render_mig_parted("p", [layouts], [H100])
    raw = [layout.model_dump() for layout in layouts]
    with pytest.raises(ValidationError, match=f"device {index} is listed by layout 1"):
        MigGeometry.model_validate({"layouts": raw})  # what tessera plan reads manifests with
    with pytest.raises(ValidationError, match=f"device {index} is listed by layout 1"):
        VnpuGeometry.model_validate({"layouts": [{"devices": d} for d in (first, second)]})


def test_indexes_beyond_a_node_select_nothing_there() -> None:
    counts = per_device([("4-7", {"7g.80gb": 1})], 4)
    assert counts == ((), (), (), ())
