"""Aliases, anchors and merge keys where Tessera edits HAMi's file: refused with where, never
spliced at the anchor's definition; every edit proven to leave the rest of the file alone."""

from __future__ import annotations

import pytest

from tessera.domain.schedulers.hami import guard as hami_guard
from tessera.domain.schedulers.hami.config import Want, plan
from tessera.domain.schedulers.hami.owned import Owned
from tessera.domain.schedulers.versions import Version

V2_10 = Version(2, 10)
SCALINGS = {"deviceSplitCount": 4, "deviceMemoryScaling": 1.5, "deviceCoreScaling": 1.0}
NVIDIA_ALIAS = """\
base: &n
  deviceSplitCount: 10
  resourceCountName: nvidia.com/gpu
nvidia: *n
"""
MERGE_IN_ENTRY = """\
defaults: &d
  aiCore: 8
  aiCPU: 7
vnpus:
  hamiVnpuCore: false
  configs:
  - chipName: 910B3
    <<: *d
"""
ANCHOR_IN_NVIDIA = """\
nvidia:
  deviceSplitCount: &split 10
other:
  copies: *split
"""
# (file, want, line, column, what the message names)
REFUSED = {
    "nvidia is an alias": (NVIDIA_ALIAS, Want(V2_10, nvidia=SCALINGS), 4, 9, "an alias (*n)"),
    "merge key in an entry": (MERGE_IN_ENTRY, Want(V2_10, ("310P3",), True), 8, 5, "merge key"),
    "anchor on a scaling": (ANCHOR_IN_NVIDIA, Want(V2_10, nvidia=SCALINGS), 2, 21, "&split"),
}


@pytest.mark.parametrize(("text", "want", "line", "column", "what"), REFUSED.values(), ids=REFUSED)
def test_aliases_where_tessera_edits_are_refused_with_line_and_column(
    text: str, want: Want, line: int, column: int, what: str
) -> None:
    with pytest.raises(hami_guard.NotEditable) as err:
        plan(text, Owned(), want)
    assert (err.value.line, err.value.column) == (line, column), err.value
    assert what in str(err.value)


def test_aliases_elsewhere_are_fine_and_kept() -> None:
    text = "x: &a 1\ny: *a\nnvidia:\n  deviceSplitCount: 10\n"
    edit = plan(text, Owned(), Want(V2_10, nvidia=SCALINGS))
    assert edit.text.startswith("x: &a 1\ny: *a\nnvidia:\n  deviceSplitCount: 4\n")


def test_an_alias_outside_the_sections_still_gives_a_proven_edit() -> None:
    """The root's last value is an alias: ``vnpus`` lands after the anchor's map (yaml_text
    follows the alias) — still every line kept and the person's data the same (checked)."""
    text = "base: &b\n  keep: 1\nlast: *b\n"
    edit = plan(text, Owned(), Want(V2_10, ("310P3",), True))
    assert all(line in edit.text.splitlines() for line in text.splitlines())
    hami_guard.check(text, edit.text, ("310P3",))


def test_check_passes_tesseras_fields_and_catches_others() -> None:
    before = "nvidia:\n  deviceSplitCount: 10\n  other: 1\n"
    hami_guard.check(before, "nvidia:\n  deviceSplitCount: 4\n  other: 1\n", ())
    with pytest.raises(hami_guard.NotEditable):
        hami_guard.check(before, "nvidia:\n  deviceSplitCount: 4\n  other: 2\n", ())
    with pytest.raises(hami_guard.NotEditable):
        hami_guard.check(before, "nvidia: [\n", ())
