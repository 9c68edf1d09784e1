"""Whether HAMi's scheduler loads a device-config.yaml, per version; and what Tessera writes.

The shapes are HAMi's Go structs as yaml.v2 decodes them
(docs/facts/hami.md §HAMi's scheduler device config): a known key of the wrong shape fails the
whole load, an unknown key is ignored.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tessera.domain.schedulers import vnpus
from tessera.domain.schedulers.hami import load as hami_load
from tessera.domain.schedulers.hami.config import Want, plan
from tessera.domain.schedulers.hami.owned import Owned
from tessera.domain.schedulers.versions import Version

V2_7, V2_8, V2_9, V2_10 = hami_load.SUPPORTED
ALL = {str(v): v for v in hami_load.SUPPORTED}
LIST_ONLY = {str(v): v for v in hami_load.SUPPORTED if not vnpus.map_form(v)}
MAP_ONLY = {str(v): v for v in hami_load.SUPPORTED if vnpus.map_form(v)}
ENTRY_310P3 = "chipName: 310P3\n    commonWord: Ascend310P\n    memoryAllocatable: 21527\n"


def _vnpus(version: Version, entry: str = ENTRY_310P3) -> str:
    """A vnpus section holding one entry, in the shape ``version`` reads."""
    if vnpus.map_form(version):
        return f"vnpus:\n  hamiVnpuCore: false\n  configs:\n  - {entry}"
    return f"vnpus:\n  - {entry}"


def _where(text: str, version: Version) -> list[str]:
    return [p.where for p in hami_load.problems(yaml.safe_load(text), version)]


@pytest.mark.parametrize("version", ALL.values(), ids=ALL.keys())
@pytest.mark.parametrize("chip", sorted(vnpus.SHIPPED))
def test_every_entry_hami_ships_loads_in_the_version_that_ships_it(
    version: Version, chip: str
) -> None:
    entry = vnpus.entry(chip, version)
    if entry is None:  # a chip that version does not ship (the 910C before v2.9)
        return
    section: Any = (
        {"hamiVnpuCore": True, "configs": [entry]} if vnpus.map_form(version) else [entry]
    )
    assert hami_load.problems({"vnpus": section}, version) == ()


@pytest.mark.parametrize("version", ALL.values(), ids=ALL.keys())
def test_an_empty_or_foreign_file_loads(version: Version) -> None:
    """Nothing, a comment, keys HAMi does not know: yaml.v2 ignores them; null is zero."""
    for doc in (None, {}, {"somethingElse": [1, 2]}, {"nvidia": None, "vnpus": None}):
        assert hami_load.problems(doc, version) == (), doc


@pytest.mark.parametrize("version", LIST_ONLY.values(), ids=LIST_ONLY.keys())
def test_up_to_v2_8_vnpus_is_a_list_and_the_map_form_fails(version: Version) -> None:
    assert _where(_vnpus(V2_8), version) == []
    found = hami_load.problems(yaml.safe_load(_vnpus(V2_10)), version)
    assert [(p.where, p.what) for p in found] == [("vnpus", "a mapping where it reads a list")]


@pytest.mark.parametrize("version", MAP_ONLY.values(), ids=MAP_ONLY.keys())
def test_from_v2_9_vnpus_is_a_map_and_the_list_form_fails(version: Version) -> None:
    assert _where(_vnpus(V2_10), version) == []
    found = hami_load.problems(yaml.safe_load(_vnpus(V2_8)), version)
    assert [(p.where, p.what) for p in found] == [
        ("vnpus", "a list where it reads {hamiVnpuCore, configs}")
    ]


# (file, versions it fails in, the place named, what is said of it)
REFUSED = {
    "a quoted number": (
        _vnpus(V2_10, 'chipName: 910B3\n    memoryAllocatable: "65536"\n'),
        MAP_ONLY,
        "vnpus.configs[0].memoryAllocatable (chip 910B3)",
        "a string ('65536') where it reads an integer",
    ),
    "templates as a map": (
        _vnpus(V2_8, "chipName: 310P3\n    templates: {name: vir01}\n"),
        LIST_ONLY,
        "vnpus[0].templates (chip 310P3)",
        "a mapping where it reads a list",
    ),
    "aiCore beyond 32 bits": (
        _vnpus(V2_10, "chipName: 310P3\n    aiCore: 4294967296\n"),
        MAP_ONLY,
        "vnpus.configs[0].aiCore (chip 310P3)",
        "4294967296 (out of range) where it reads a 32-bit integer",
    ),
    "hamiVnpuCore as a word": (
        "vnpus:\n  hamiVnpuCore: yes please\n  configs: []\n",
        MAP_ONLY,
        "vnpus.hamiVnpuCore",
        "a string ('yes please') where it reads true or false",
    ),
    "a negative split count": (
        "nvidia:\n  deviceSplitCount: -1\n",
        ALL,
        "nvidia.deviceSplitCount",
        "-1 (out of range) where it reads an unsigned integer",
    ),
    "scaling as a list": (
        "nvidia:\n  deviceMemoryScaling: [1]\n",
        ALL,
        "nvidia.deviceMemoryScaling",
        "a list where it reads a number",
    ),
    "a vendor section as a list": (
        "metax: [gpu]\n",
        ALL,
        "metax",
        "a list where it reads a mapping",
    ),
    "v2.10's allowlist as a string": (
        "nvidia:\n  migProfileAllowlist: 1g.5gb\n",
        {"v2.10.0": V2_10},
        "nvidia.migProfileAllowlist",
        "a string ('1g.5gb') where it reads a list",
    ),
    "the older geometries' count as a word": (
        "nvidia:\n  knownMigGeometries:\n  - models: [A30]\n"
        "    allowedGeometries: [[{name: 1g.6gb, memory: 6144, count: four}]]\n",
        {str(v): v for v in (V2_7, V2_8, V2_9)},
        "nvidia.knownMigGeometries[0].allowedGeometries[0][0].count",
        "a string ('four') where it reads a 32-bit integer",
    ),
}


@pytest.mark.parametrize(("text", "fails", "where", "what"), REFUSED.values(), ids=REFUSED.keys())
@pytest.mark.parametrize("version", ALL.values(), ids=ALL.keys())
def test_shapes_hami_refuses_are_named_by_place_and_version(
    version: Version, text: str, fails: dict[str, Version], where: str, what: str
) -> None:
    found = hami_load.problems(yaml.safe_load(text), version)
    if str(version) not in fails:
        assert [p.where for p in found if p.where == where] == []
        return
    assert [(p.where, p.what) for p in found] == [(where, what)]
    with pytest.raises(hami_load.Unloadable) as raised:
        hami_load.refuse(text, version)
    assert f"HAMi {version}'s LoadConfig would fail: {where}: {what}" in str(raised.value)


@pytest.mark.parametrize(
    ("value", "fits"),
    [
        ("0", True),
        ("21527", True),
        ("21527.9", True),  # yaml.v2 truncates a float into an integer field
        ("~", True),  # null: the zero value
        ("'21527'", False),
        ("true", False),
        (".inf", False),
        ("2026-12-06", False),  # a date, to yaml: not a number
        ("-9223372036854775809", False),
    ],
)
def test_an_int64_field_takes_what_yaml_v2_decodes_into_one(value: str, fits: bool) -> None:
    text = _vnpus(V2_10, f"chipName: 310P3\n    memoryCapacity: {value}\n")
    assert (_where(text, V2_10) == []) == fits


# --- what Tessera writes: a person's entries in the other version's shape, converted or refused


@pytest.mark.parametrize("version", ALL.values(), ids=ALL.keys())
@pytest.mark.parametrize("written_for", ALL.values(), ids=ALL.keys())
def test_a_kept_section_of_another_versions_shape_is_reshaped_even_without_ascend_chips(
    version: Version, written_for: Version
) -> None:
    """A person's 910B3 entry in the shape of ``written_for``; the policies want only the
    nvidia scalings (no Ascend chip) on HAMi ``version``: what is written loads there."""
    text = "# theirs\n" + _vnpus(written_for, "chipName: 910B3   # tuned\n    aiCore: 20\n")
    edit = plan(text, Owned(), Want(version, nvidia={"deviceSplitCount": 4}))
    assert hami_load.problems(yaml.safe_load(edit.text), version) == ()
    section = yaml.safe_load(edit.text)["vnpus"]
    assert isinstance(section, dict) == vnpus.map_form(version)
    entries = section["configs"] if isinstance(section, dict) else section
    assert entries == [{"chipName": "910B3", "aiCore": 20}]
    assert "# tuned" in edit.text and edit.text.startswith("# theirs\n")
    reshaped = vnpus.map_form(version) != vnpus.map_form(written_for)
    assert any(n.startswith("reshaped vnpus") for n in edit.notes) == reshaped


@pytest.mark.parametrize("version", ALL.values(), ids=ALL.keys())
def test_a_kept_entry_hami_would_refuse_is_not_written_over_and_is_named(version: Version) -> None:
    text = _vnpus(version, 'chipName: 910B3\n    aiCore: "20"\n')
    with pytest.raises(hami_load.Unloadable) as raised:
        plan(text, Owned(), Want(version, ("310P3",), nvidia={"deviceSplitCount": 4}))
    err = raised.value
    assert err.version == version and [p.chip for p in err.problems] == ["910B3"]
    assert (err.line, err.column) == (text.splitlines().index('    aiCore: "20"') + 1, 13)
    assert "aiCore (chip 910B3): a string ('20') where it reads a 32-bit integer" in str(err)


def test_without_a_known_version_nothing_is_judged() -> None:
    """The version is required before writing (WaitingForScheduler asks for it); a release
    (no policy wants anything) leaves the person's file as it is, whatever its shape."""
    text = _vnpus(V2_10, 'chipName: 910B3\n    aiCore: "20"\n')
    assert plan(text, Owned(), Want(None)).text == text


def test_newer_and_older_versions_read_as_the_nearest_known() -> None:
    assert hami_load.schema(Version(2, 11)) == hami_load.schema(V2_10)
    assert hami_load.schema(Version(2, 6)) == hami_load.schema(V2_7)


def test_the_place_is_given_in_the_map_as_the_person_sees_it_even_once_reshaped() -> None:
    """v2.8's list kept under v2.10: Tessera would reshape it (lines move), but the line and
    column name the person's line in the stored map."""
    text = "# theirs\n" + _vnpus(
        V2_8, "chipName: 310P3\n    aiCore: 8\n  - chipName: 910B3\n    aiCPU: x\n"
    )
    with pytest.raises(hami_load.Unloadable) as raised:
        plan(text, Owned(), Want(V2_10, ("910B4",), True))
    assert raised.value.problems[0].where == "vnpus.configs[1].aiCPU (chip 910B3)"
    assert (raised.value.line, raised.value.column) == (6, 12)
    assert text.splitlines()[5] == "    aiCPU: x"
