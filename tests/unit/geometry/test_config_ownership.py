"""Which agent configs a pool owns, and what is left when a pool's last config goes.

A pool's configs are ``tessera-<pool>-<hash>`` (``config_name``); ``configs_document`` drops
the pool's configs nothing wants or keeps. Pool ``vms`` must never drop pool ``vms-big``'s
configs (``tessera-vms-`` is a prefix of ``tessera-vms-big-<hash>``), in any section.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from vgpu_parser import parse

from tessera.domain.cluster import pools
from tessera.domain.geometry.layouts import config_name

VGPU = [{"devices": "all", "vgpu-devices": {"A100-20C": 2}}]
MIG = [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]
VNPU = [{"devices": "all", "templates": {"vir02": 2}}]


def _doc(section: str, configs: dict[str, Any]) -> str:
    return yaml.safe_dump({"version": "v1", section: configs})


@pytest.mark.parametrize(
    ("section", "entries"),
    [("vgpu-configs", VGPU), ("mig-configs", MIG), ("vnpu-configs", VNPU)],
)
@pytest.mark.parametrize(("pool", "other"), [("vms", "vms-big"), ("a", "a-b-c"), ("x", "x-1")])
def test_a_pass_of_one_pool_never_removes_a_pool_whose_name_it_prefixes(
    section: str, entries: list[dict[str, Any]], pool: str, other: str
) -> None:
    old, new = config_name(pool, ["old"]), config_name(pool, ["new"])
    others = {config_name(other, ["a"]): entries, config_name(other, ["b"]): entries}
    existing = _doc(section, {old: entries, **others, "default": entries})
    text = pools.configs_document(existing, pool, section, {new: entries}, ())
    assert text is not None
    assert set(yaml.safe_load(text)[section]) == {new, "default", *others}


def test_a_pool_owns_exactly_its_config_names() -> None:
    assert pools.owns("vms", config_name("vms", {"any": 1}))
    assert pools.owns("vms", "tessera-vms-0123456789")
    for foreign in (
        config_name("vms-big", {"any": 1}),
        "tessera-vms-big",
        "tessera-vms-012345678",  # one hex digit short
        "tessera-vms-0123456789a",
        "tessera-vms-ABCDEF0123",
        "tessera-vms-",
        "default",
    ):
        assert not pools.owns("vms", foreign), foreign


def test_a_long_pool_name_owns_its_truncated_config_names() -> None:
    pool = "p" * 80
    assert pools.owns(pool, config_name(pool, ["x"]))
    assert not pools.owns(pool, config_name("p" * 20, ["x"]))


@pytest.mark.parametrize("section", ["vgpu-configs", "mig-configs", "vnpu-configs"])
def test_when_the_last_config_goes_the_file_keeps_no_empty_section(section: str) -> None:
    """The device manager refuses ``vgpu-configs: {}`` ("at least one entry in 'vgpu-configs'
    is required") and accepts a file with only ``version``; mig-parted alike."""
    mine = config_name("vms", ["old"])
    text = pools.configs_document(_doc(section, {mine: VGPU}), "vms", section, {}, ())
    assert text is not None
    assert yaml.safe_load(text) == {"version": "v1"}
    assert parse(text) is None
    # and that file stays as it is on the next pass
    assert pools.configs_document(text, "vms", section, {}, ()) is None


def test_the_parser_stand_in_refuses_an_empty_section() -> None:
    assert parse("version: v1\nvgpu-configs: {}\n") is not None
