"""Tessera's fields of HAMi's device-config.yaml: set, kept, released — nothing else touched."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tessera.domain.schedulers import vnpus
from tessera.domain.schedulers.hami import owned as hami_owned
from tessera.domain.schedulers.hami.config import Want, plan, present_chips
from tessera.domain.schedulers.hami.owned import Owned
from tessera.domain.schedulers.versions import Version

V2_10, V2_8 = Version(2, 10), Version(2, 8)
SCALINGS = {"deviceSplitCount": 4, "deviceMemoryScaling": 1.5, "deviceCoreScaling": 1.0}
# the shape of HAMi v2.10's chart, abridged, with a person's comment and their own 910B3 entry
MAP_FORM = """\
# owned by the platform team
nvidia:
  resourceCountName: nvidia.com/gpu
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  migProfileAllowlist:
  - models: [ "A30" ]
    profiles: [ "1g.6gb" ]
vnpus:
  hamiVnpuCore: false
  configs:
  # tuned by hand
  - chipName: 910B3
    aiCore: 20
    templates:
      - {name: vir05_1c_16g, memory: 16384, aiCore: 5, aiCPU: 1}
"""
LIST_FORM = """\
vnpus:
  # v2.8 style
  - chipName: 910B3   # theirs
    aiCore: 20
nvidia: {resourceCountName: nvidia.com/gpu}
"""
FILES = {"map form": MAP_FORM, "list form": LIST_FORM, "empty": "", "comment only": "# hi\n"}
WANTS = {
    "soft slicing, v2.10": Want(V2_10, ("310P3",), True),
    "soft slicing off, v2.10": Want(V2_10, ("310P3", "910B4"), False),
    "v2.8": Want(V2_8, ("310P3",)),
    "nvidia only": Want(V2_10, nvidia=SCALINGS),
    "everything": Want(V2_10, ("310P3", "910B4-1"), True, SCALINGS),
}


@pytest.mark.parametrize("want", WANTS.values(), ids=WANTS.keys())
@pytest.mark.parametrize("text", FILES.values(), ids=FILES.keys())
def test_released_fields_give_back_the_file_as_written(text: str, want: Want) -> None:
    """Whatever Tessera wrote, a release (no policy left) returns the person's file."""
    written = plan(text, Owned(), want)
    released = plan(written.text, written.owned, Want(None))
    assert released.owned == Owned() and released.owned.annotation() is None
    if _reshaped(text, want):  # the other version's shape stays; the person's entries too
        assert present_chips(released.text) == present_chips(text)
        comments = [line.split("#", 1)[1] for line in text.splitlines() if "#" in line]
        assert all(f"#{words}" in released.text for words in comments)
    else:
        assert released.text == text


@pytest.mark.parametrize("want", WANTS.values(), ids=WANTS.keys())
@pytest.mark.parametrize("text", FILES.values(), ids=FILES.keys())
def test_what_is_written_reads_as_wanted_and_a_second_plan_changes_nothing(
    text: str, want: Want
) -> None:
    written = plan(text, Owned(), want)
    doc = yaml.safe_load(written.text)
    section = doc.get("vnpus")
    before = (yaml.safe_load(text) or {}).get("vnpus")
    shaped = vnpus.map_form(want.version) if want.chips or before else isinstance(before, dict)  # type: ignore[arg-type]
    assert isinstance(section, dict) == shaped
    entries = section.get("configs") if isinstance(section, dict) else section or []
    for chip in want.chips:
        assert _entry(entries, chip) == vnpus.entry(chip, want.version)  # type: ignore[arg-type]
    if want.hami_vnpu_core is not None and isinstance(section, dict):
        assert section["hamiVnpuCore"] is want.hami_vnpu_core
    for key, value in want.nvidia.items():
        assert doc["nvidia"][key] == value
    again = plan(written.text, written.owned, want)
    assert again.text == written.text and again.owned == written.owned and again.notes == ()


def test_a_persons_entry_for_the_chip_is_theirs() -> None:
    mine = MAP_FORM.replace("chipName: 910B3", "chipName: 310P3")
    written = plan(mine, Owned(), Want(V2_10, ("310P3",), True))
    assert written.owned.chips == ()  # nothing of Tessera's for that chip
    assert "  - chipName: 310P3\n    aiCore: 20\n" in written.text  # as they wrote it
    assert _gone(mine, written.text) == ["  hamiVnpuCore: false"]


def test_a_hand_edit_of_tesseras_entry_is_rewritten() -> None:
    written = plan(MAP_FORM, Owned(), Want(V2_10, ("310P3",)))
    edited = written.text.replace("memoryAllocatable: 21527", "memoryAllocatable: 1")
    again = plan(edited, written.owned, Want(V2_10, ("310P3",)))
    assert again.text == written.text
    assert again.notes == ("rewrote Tessera's vnpus entry for chip 310P3 as HAMi v2.10.0 ships it",)


def test_the_version_moves_the_shape_and_back_byte_for_byte() -> None:
    want = Want(V2_10, ("310P3",), True, SCALINGS)
    written = plan(MAP_FORM, Owned(), want)
    old = plan(written.text, written.owned, Want(V2_8, ("310P3",), None, SCALINGS))
    assert isinstance(yaml.safe_load(old.text)["vnpus"], list)
    assert "# tuned by hand" in old.text
    assert plan(old.text, old.owned, want).text == written.text
    back = plan(written.text, written.owned, Want(None))
    assert back.text == MAP_FORM


def test_held_fields_are_left_as_they_are() -> None:
    held = Want(V2_10, ("310P3",), None, {}, frozenset({"hamiVnpuCore", "nvidia"}))
    written = plan(MAP_FORM, Owned(), Want(V2_10, ("310P3",), True, SCALINGS))
    kept = plan(written.text, written.owned, held)
    assert yaml.safe_load(kept.text)["vnpus"]["hamiVnpuCore"] is True
    assert yaml.safe_load(kept.text)["nvidia"]["deviceSplitCount"] == 4
    assert kept.owned.hami_vnpu_core == (False,) and kept.owned.nvidia == written.owned.nvidia


@pytest.mark.parametrize(
    ("owned", "annotation"),
    [
        (Owned(), None),
        (Owned(("310P3",), True, (False,), {"deviceSplitCount": ()}),
         '{"chips":["310P3"],"hamiVnpuCore":{"was":false},"nvidia":{"deviceSplitCount":{}},'
         '"vnpusSection":true}'),
    ],
)  # fmt: skip
def test_ownership_round_trips_through_its_annotation(owned: Owned, annotation: str | None) -> None:
    assert owned.annotation() == annotation
    key = "tessera.io/managed-fields"
    assert hami_owned.parse({key: annotation} if annotation else {}, key) == owned
    assert hami_owned.parse({key: "not json"}, key) == Owned()


def test_present_chips_counts_everyones_entries() -> None:
    assert present_chips(MAP_FORM) == {"910B3"}
    assert present_chips(LIST_FORM) == {"910B3"}
    assert present_chips("") == set()


def _reshaped(text: str, want: Want) -> bool:
    before = (yaml.safe_load(text) or {}).get("vnpus")
    shape = vnpus.map_form(want.version) if want.version else None
    return before is not None and shape is not None and isinstance(before, dict) != shape


def _entry(entries: list[Any], chip: str) -> Any:
    return next((e for e in entries if e.get("chipName") == chip), None)


def _gone(before: str, after: str) -> list[str]:
    left = after.splitlines()
    out = []
    for line in before.splitlines():
        if line in left:
            left.remove(line)
        else:
            out.append(line)
    return out
