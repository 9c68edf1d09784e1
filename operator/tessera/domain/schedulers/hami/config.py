"""Tessera's fields of HAMi's ``device-config.yaml``, edited in place.

Given the file as people left it, what Tessera owned there (``owned``) and what the
policies want (``Want``), ``plan`` returns the file with only Tessera's fields changed —
every other line byte for byte (``yaml_text``) — and the new ownership record:

* ``vnpus`` in the shape the HAMi version reads (``vnpus.map_form``); a section in the other
  shape is reshaped, its entries and comments moved along, not rewritten;
* one entry per wanted chip: a person's entry for that chip is theirs and kept as written,
  Tessera's own is kept equal to HAMi's shipped values (a hand edit is restored, noted);
  Tessera's entries for chips no policy wants any more go;
* ``vnpus.hamiVnpuCore`` (map form only) and the ``nvidia:`` scalings, each set with the value
  it replaced remembered, and that value given back when no policy wants the field;
* a field in ``held`` (the policies disagree on it) is left exactly as it is;
* the whole result, people's entries included, loadable by HAMi's version (``load``):
  a ``vnpus`` section in the other version's shape is reshaped even when no policy asks for
  Ascend chips (the one shape change between versions), anything else HAMi would refuse is
  ``hami_load.Unloadable`` — nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from tessera.domain.schedulers import vnpus, yaml_text
from tessera.domain.schedulers.hami import guard as hami_guard
from tessera.domain.schedulers.hami import load as hami_load
from tessera.domain.schedulers.hami import shape as hami_shape
from tessera.domain.schedulers.hami.owned import Owned, Prior
from tessera.domain.schedulers.versions import Version

NVIDIA_FIELDS = ("deviceSplitCount", "deviceMemoryScaling", "deviceCoreScaling")
HAMI_VNPU_CORE = hami_shape.HAMI_VNPU_CORE


@dataclass(frozen=True)
class Want:
    """What the policies of one HAMi config want of it, conflicts already taken out."""

    version: Version | None
    """HAMi's version; None (releasing only): the ``vnpus`` shape found is kept."""
    chips: tuple[str, ...] = ()
    """HAMi ``chipName`` of every chip their pools hold that HAMi ships an entry for."""
    hami_vnpu_core: bool | None = None
    nvidia: Mapping[str, Any] = field(default_factory=dict)
    held: frozenset[str] = frozenset()
    """``hamiVnpuCore`` / ``nvidia``: policies disagree; left as it is."""


@dataclass(frozen=True)
class Edit:
    text: str
    owned: Owned
    notes: tuple[str, ...] = ()

    def changed(self, before: str) -> bool:
        return self.text != before


def plan(text: str, owned: Owned, want: Want) -> Edit:
    """The file with Tessera's fields as ``want`` says; ``yaml_text.YamlInvalidError`` if the
    file does not parse, ``hami_guard.NotEditable`` if Tessera cannot edit it without
    touching a person's keys (aliases, anchors, merge keys where it edits) — then nothing
    is written; ``hami_load.Unloadable`` (also a ``YamlInvalidError``) if HAMi's version
    could not load the result."""
    hami_guard.refuse(text)  # raises for a file that does not parse, or not safely editable
    edit = _reshape(Edit(text, owned), want)  # a person's vnpus in the other version's shape too
    touches_vnpus = bool(want.chips or want.hami_vnpu_core is not None or owned.chips)
    if touches_vnpus or owned.hami_vnpu_core is not None:
        edit = _vnpus(edit, want)
    edit = _nvidia(edit, want)
    hami_guard.check(text, edit.text, {*owned.chips, *edit.owned.chips})
    if want.version is not None:
        hami_load.refuse(edit.text, want.version, text)
    return edit


def present_chips(text: str) -> set[str]:
    """The ``chipName`` of every ``vnpus`` entry in the file, whoever wrote it;
    ``yaml_text.YamlInvalidError`` if it does not parse."""
    yaml_text.compose(text)
    found = _doc(text).get("vnpus")
    entries = found.get("configs") if isinstance(found, dict) else found
    return {str(e.get("chipName")) for e in entries or [] if isinstance(e, dict)}


def _doc(text: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text)
    return loaded if isinstance(loaded, dict) else {}


def _vnpus(edit: Edit, want: Want) -> Edit:
    """Tessera's entries and ``hamiVnpuCore`` on a section ``plan`` has already reshaped."""
    found = _doc(edit.text).get("vnpus")
    mapped = vnpus.map_form(want.version) if want.version else isinstance(found, dict)
    entries_at: list[str | int] = ["vnpus", "configs"] if mapped else ["vnpus"]
    for chip in edit.owned.chips:
        if chip not in want.chips:
            index = _index(edit.text, entries_at, chip)
            text = (
                edit.text if index is None else yaml_text.remove_item(edit.text, entries_at, index)
            )
            note = f"removed Tessera's vnpus entry for chip {chip}: no policy's pool holds it"
            edit = Edit(text, edit.owned.with_chip(chip, False), (*edit.notes, note))
    for chip in want.chips:
        edit = _entry(edit, entries_at, chip, want)
    if mapped and HAMI_VNPU_CORE not in want.held:
        edit = _core(edit, want.hami_vnpu_core)
    # In the list form there is no hamiVnpuCore; an owned one keeps its prior for the day
    # the map form (and the person's value) comes back.
    current = _doc(edit.text).get("vnpus")
    left = current.get("configs") if isinstance(current, dict) else current
    extra = set(current) - {"configs"} if isinstance(current, dict) else set()
    if edit.owned.vnpus_section and not left and not extra:
        note = "removed the vnpus section Tessera created"
        text = yaml_text.remove_key(edit.text, [], "vnpus")
        return Edit(text, replace(edit.owned, vnpus_section=False), (*edit.notes, note))
    return edit


def _reshape(edit: Edit, want: Want) -> Edit:
    """``vnpus`` turned into the shape HAMi's version reads, its entries' lines moved along
    (into the map form with the ``hamiVnpuCore`` the policies want, if any)."""
    version = want.version
    core = None if HAMI_VNPU_CORE in want.held else want.hami_vnpu_core
    if version is None:
        return edit
    root = yaml_text.compose(edit.text)
    node = yaml_text.find(root, ["vnpus"])
    current = _doc(edit.text).get("vnpus")
    mapped = vnpus.map_form(version)
    if node is None or current is None or isinstance(current, dict) == mapped:
        return edit
    owned = edit.owned
    if mapped and isinstance(current, list):
        text = hami_shape.to_map(edit.text, node, core)
        if core is not None and owned.hami_vnpu_core is None:
            owned = replace(owned, hami_vnpu_core=())
        note = f"reshaped vnpus into {{hamiVnpuCore, configs}}: HAMi {version} reads that form"
    elif not mapped and isinstance(current, dict):
        text = hami_shape.to_list(edit.text, node, current)
        note = f"reshaped vnpus into a list: HAMi {version} reads no other form"
    else:
        return edit
    return Edit(text, owned, (*edit.notes, note))


def _items(text: str, at: list[str | int]) -> list[Any]:
    """The entries list at ``at`` (``vnpus`` or ``vnpus.configs``); [] if there is none."""
    found: Any = _doc(text)
    for step in at:
        found = found.get(step) if isinstance(found, dict) else None
    return found if isinstance(found, list) else []


def _index(text: str, at: list[str | int], chip: str) -> int | None:
    for i, item in enumerate(_items(text, at)):
        if isinstance(item, dict) and str(item.get("chipName")) == chip:
            return i
    return None


def _entry(edit: Edit, at: list[str | int], chip: str, want: Want) -> Edit:
    wanted = vnpus.entry(chip, want.version) if want.version else None
    if wanted is None:
        return edit
    index = _index(edit.text, at, chip)
    ours = chip in edit.owned.chips
    if index is not None and not ours:
        return edit  # a person's entry for this chip: theirs, kept as written
    if index is not None:
        if _items(edit.text, at)[index] == wanted:
            return edit
        text = yaml_text.set_item(edit.text, at, index, wanted)
        note = f"rewrote Tessera's vnpus entry for chip {chip} as HAMi {want.version} ships it"
        return Edit(text, edit.owned, (*edit.notes, note))
    text, owned = _add_entry(edit, at, wanted, want)
    return Edit(text, owned.with_chip(chip, True), (*edit.notes, f"added vnpus entry {chip}"))


def _add_entry(
    edit: Edit, at: list[str | int], wanted: dict[str, Any], want: Want
) -> tuple[str, Owned]:
    doc = _doc(edit.text)
    if doc.get("vnpus") is None and want.version is not None:
        core = None if HAMI_VNPU_CORE in want.held else want.hami_vnpu_core
        section = vnpus.section([wanted], want.version, core)
        text = yaml_text.set_key(edit.text, [], "vnpus", section)
        mapped = isinstance(section, dict) and HAMI_VNPU_CORE in section
        owned = replace(edit.owned, vnpus_section=True)
        return text, replace(owned, hami_vnpu_core=()) if mapped else owned
    if len(at) == 2 and not isinstance(doc["vnpus"].get("configs"), list):
        return yaml_text.set_key(edit.text, ["vnpus"], "configs", [wanted]), edit.owned
    return yaml_text.set_item(edit.text, at, None, wanted), edit.owned


def _core(edit: Edit, value: bool | None) -> Edit:
    current = _doc(edit.text).get("vnpus")
    if not isinstance(current, dict):
        if value is None:
            return edit
        text = yaml_text.set_key(edit.text, [], "vnpus", {HAMI_VNPU_CORE: value, "configs": []})
        owned = replace(edit.owned, hami_vnpu_core=(), vnpus_section=True)
        return Edit(text, owned, (*edit.notes, f"set vnpus.hamiVnpuCore {str(value).lower()}"))
    prior = edit.owned.hami_vnpu_core
    text, now, note = _scalar(edit.text, ["vnpus"], HAMI_VNPU_CORE, current, value, prior)
    return Edit(text, replace(edit.owned, hami_vnpu_core=now), (*edit.notes, *note))


def _scalar(
    text: str,
    path: list[str | int],
    key: str,
    current: Mapping[str, Any],
    value: Any,
    prior: Prior | None,
) -> tuple[str, Prior | None, tuple[str, ...]]:
    """Set or release one scalar: the new text, the new ownership (its prior), the note."""
    where = ".".join([*map(str, path), key])
    if value is None:
        if prior is None:
            return text, None, ()
        if prior:
            if current.get(key) == prior[0] and key in current:
                return text, None, ()
            shown = yaml_text.scalar(prior[0])
            return (
                yaml_text.set_key(text, path, key, prior[0]),
                None,
                (f"gave {where} back its {shown}",),
            )
        return yaml_text.remove_key(text, path, key), None, (f"removed Tessera's {where}",)
    owned = prior if prior is not None else ((current[key],) if key in current else ())
    if key in current and _same(current[key], value):
        return text, owned, ()
    note = f"set {where} {yaml_text.scalar(value)}"
    return yaml_text.set_key(text, path, key, value), owned, (note,)


def _same(a: Any, b: Any) -> bool:
    """Equal as HAMi reads them: 1 and 1.0 alike, true and 1 not."""
    return bool(a == b and isinstance(a, bool) == isinstance(b, bool))


def _nvidia(edit: Edit, want: Want) -> Edit:
    if "nvidia" in want.held:
        return edit
    section = _doc(edit.text).get("nvidia")
    if not section and want.nvidia:
        text = yaml_text.set_key(edit.text, [], "nvidia", dict(want.nvidia))
        owned = replace(edit.owned, nvidia=dict.fromkeys(want.nvidia, ()), nvidia_section=True)
        shown = ", ".join(f"{k} {yaml_text.scalar(v)}" for k, v in want.nvidia.items())
        return Edit(text, owned, (*edit.notes, f"set nvidia {shown}"))
    if not isinstance(section, dict):
        return edit
    for key in NVIDIA_FIELDS:
        prior = edit.owned.nvidia.get(key)
        current = _doc(edit.text).get("nvidia") or {}
        text, now, note = _scalar(edit.text, ["nvidia"], key, current, want.nvidia.get(key), prior)
        edit = Edit(text, edit.owned.with_nvidia(key, now), (*edit.notes, *note))
    left = _doc(edit.text).get("nvidia")
    if edit.owned.nvidia_section and not edit.owned.nvidia and not left:
        text = yaml_text.remove_key(edit.text, [], "nvidia")
        return Edit(text, replace(edit.owned, nvidia_section=False), edit.notes)
    return edit
