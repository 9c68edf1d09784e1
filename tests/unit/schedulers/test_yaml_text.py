"""In-place YAML edits: only the edited node's characters or lines change."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tessera.domain.schedulers import yaml_text as y

FILE = """\
# top comment
nvidia:
  deviceSplitCount: 10 # theirs
  migProfileAllowlist:
  - models: [ "A30" ]
vnpus:
- chipName: 910B3
  templates:
    - {name: vir05_1c_16g, memory: 16384}
# a chip of their own
- chipName: X
  aiCore: 1
# trailing
other: 1
"""

Edit = Callable[[str], str]


@pytest.mark.parametrize(
    ("edit", "before", "after"),
    [
        # the edit, the lines it replaces, the lines it leaves instead
        (lambda t: y.set_key(t, ["nvidia"], "deviceSplitCount", 4),
         ["  deviceSplitCount: 10 # theirs"], ["  deviceSplitCount: 4 # theirs"]),
        (lambda t: y.set_key(t, ["nvidia"], "deviceCoreScaling", 1.5),
         [], ["  deviceCoreScaling: 1.5"]),
        (lambda t: y.remove_key(t, ["nvidia"], "deviceSplitCount"),
         ["  deviceSplitCount: 10 # theirs"], []),
        (lambda t: y.set_item(t, ["vnpus"], None, {"chipName": "Y", "templates": [{"n": 1}]}),
         [], ["- chipName: Y", "  templates:", "    - {n: 1}"]),
        (lambda t: y.set_item(t, ["vnpus"], 1, {"chipName": "Z"}),
         ["- chipName: X", "  aiCore: 1"], ["- {chipName: Z}"]),
        (lambda t: y.remove_item(t, ["vnpus"], 0),
         ["- chipName: 910B3", "  templates:", "    - {name: vir05_1c_16g, memory: 16384}"], []),
        (lambda t: y.set_key(t, [], "added", {"a": 1}), [], ["added:", "  a: 1"]),
    ],
)  # fmt: skip
def test_only_the_edited_lines_change(edit: Edit, before: list[str], after: list[str]) -> None:
    edited = edit(FILE)
    assert _gone(FILE, edited) == before
    assert _gone(edited, FILE) == after
    y.compose(edited)  # still YAML


def test_insertions_land_inside_their_block() -> None:
    edited = y.set_item(FILE, ["vnpus"], None, {"chipName": "Y"})
    assert "  aiCore: 1\n- {chipName: Y}\n# trailing\nother: 1\n" in edited  # before the comment
    edited = y.set_key(FILE, ["nvidia"], "deviceCoreScaling", 1)
    assert '  - models: [ "A30" ]\n  deviceCoreScaling: 1\nvnpus:' in edited


@pytest.mark.parametrize(
    ("text", "edit", "result"),
    [
        ("vnpus: []\n", lambda t: y.set_item(t, ["vnpus"], None, {"a": 1}), "vnpus:\n  - {a: 1}\n"),
        ("vnpus: [{a: 1}]\n", lambda t: y.remove_item(t, ["vnpus"], 0), "vnpus: []\n"),
        ("vnpus:\n- a: 1\n", lambda t: y.remove_item(t, ["vnpus"], 0), "vnpus: []\n"),
        ("n: {a: 1}\n", lambda t: y.set_key(t, ["n"], "b", 2), "n: {a: 1, b: 2}\n"),
        ("", lambda t: y.set_key(t, [], "n", {"b": 2}), "n:\n  b: 2\n"),
        ("# only a comment", lambda t: y.set_key(t, [], "n", 1), "# only a comment\nn: 1\n"),
        ("n:\nm: 1\n", lambda t: y.set_key(t, [], "n", {"b": 2}), "n:\n  b: 2\nm: 1\n"),
        ("n: 1", lambda t: y.set_key(t, [], "m", True), "n: 1\nm: true\n"),
        ("n: 'x'\n", lambda t: y.set_key(t, [], "n", ""), "n: ''\n"),
    ],
)  # fmt: skip
def test_edge_shapes(text: str, edit: Edit, result: str) -> None:
    assert edit(text) == result


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a: 1\n b: 2\n", "line 2, column 3: mapping values are not allowed here"),
        ("a: [1, 2\n", "line 2, column 1"),
        ("- a\n- b\n", "line 1, column 1: not a map"),
        ('a: "x\n', "line 2, column 1"),
    ],
)
def test_a_file_that_does_not_parse_is_reported_with_line_and_column(text: str, where: str) -> None:
    with pytest.raises(y.YamlInvalidError) as err:
        y.compose(text)
    assert str(err.value).startswith(where), str(err.value)


def _gone(before: str, after: str) -> list[str]:
    left = after.splitlines()
    out = []
    for line in before.splitlines():
        if line in left:
            left.remove(line)
        else:
            out.append(line)
    return out
