"""Class names, selectors, and Tessera's own check of each selector it generates."""

from __future__ import annotations

import pytest

from tessera.domain.dra import naming, selfcheck

GUARD = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com']"


@pytest.mark.parametrize(
    ("selects", "geometry", "sharing"),
    [
        pytest.param("gpu", "gpu.tessera.io", "s.gpu.sharing.tessera.io", id="whole-gpu"),
        pytest.param(
            "1g.10gb", "mig-1g.10gb.tessera.io", "s.mig-1g.10gb.sharing.tessera.io", id="mig"
        ),
        pytest.param(
            "1g.10gb+me",
            "mig-1g.10gb-me.tessera.io",
            "s.mig-1g.10gb-me.sharing.tessera.io",
            id="plus-becomes-dash",
        ),
    ],
)
def test_names(selects: str, geometry: str, sharing: str) -> None:
    assert naming.geometry_class(selects) == geometry
    assert naming.sharing_class("s", selects) == sharing
    assert naming.selects_of(geometry) == selects  # read back: a claim's class as demand
    assert naming.selects_of(sharing) == selects
    assert naming.selects_of(naming.sharing_class("team.a.mig-x", selects)) == selects


@pytest.mark.parametrize(
    "name",
    ["gpu.nvidia.com", "tessera.io", "mig-.tessera.io", "x.tessera.io", ".sharing.tessera.io"],
)
def test_a_class_tessera_does_not_name_selects_nothing(name: str) -> None:
    assert naming.selects_of(name) is None


@pytest.mark.parametrize(
    ("selects", "want"),
    [
        pytest.param("gpu", f"{GUARD}.type == 'gpu'", id="whole-gpu"),
        pytest.param(
            "1g.10gb",
            f"{GUARD}.type == 'mig' && device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
            id="mig-type-before-profile",
        ),
    ],
)
def test_selector_reads_driver_then_type_then_attribute(selects: str, want: str) -> None:
    assert naming.selector(selects) == want
    assert selfcheck.check(want) == ()


ATTR = "device.attributes['gpu.nvidia.com']"


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        pytest.param(
            f"{ATTR}.type == 'gpu'", "must start with device.driver", id="driver-not-first"
        ),
        pytest.param(
            f"{GUARD}.profile == '1g.10gb'", "device type right after", id="type-not-second"
        ),
        pytest.param(
            f"{GUARD}.type == 'gpu' && {ATTR}.profile == '1g.10gb'",
            "reads profile, which a gpu device may lack",
            id="profile-on-whole-gpu",
        ),
        pytest.param(
            f"{GUARD}.type == 'mig' && {ATTR}.profile == '1g.10gb' || true",
            "not an attribute compared with a quoted literal",
            id="unquoted-tail",
        ),
        pytest.param(
            f"{GUARD}.type == 'mig' && {ATTR}.profile == 'a\\'b'",
            "not an attribute compared with a quoted literal",
            id="quote-in-literal",
        ),
        pytest.param(f"{GUARD}.type == 'vfio'", "not one Tessera selects", id="unknown-type"),
        pytest.param(
            f"{GUARD}.type == 'mig' && " + " && ".join([f"{ATTR}.uuid == 'x'"] * 300),
            "over 10240",
            id="over-10KiB",
        ),
    ],
)
def test_selfcheck_reports(expression: str, problem: str) -> None:
    found = selfcheck.check(expression)
    assert any(problem in p for p in found), found
