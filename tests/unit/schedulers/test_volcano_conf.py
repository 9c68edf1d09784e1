"""volcano.conf: only the deviceshare arguments change; every other byte of the conf stays."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tessera.domain.schedulers.volcano import conf as v

DATA = Path(__file__).parents[2] / "data" / "volcano"
WANTED: dict[str, v.Scalar | None] = {
    v.ENABLE_VNPU: True,
    v.POLICY: "spread",
    v.WEIGHT: 10,
    v.CM_NAME: "tessera-volcano-device-config",
    v.CM_NAMESPACE: "volcano-system",
}
TESSERA_LINES = (*(f"{k}:" for k in v.OWNED), "- name: deviceshare", "arguments:")


def _others(text: str) -> list[str]:
    """The conf's lines less those an edit may add, change or remove."""
    return [line for line in text.splitlines() if not line.strip().startswith(TESSERA_LINES)]


@pytest.mark.parametrize(
    "example", ["vgpu.conf", "hami-vnpu.conf", "mindcluster.conf", "no-deviceshare.conf"]
)
def test_round_trip_on_upstream_examples(example: str) -> None:
    before = (DATA / example).read_text()
    after = v.edit(before, WANTED)
    kept = {k: x for k, x in v.arguments(before).items() if k not in WANTED}
    assert v.arguments(after) == {**kept, **WANTED}
    assert _others(after) == _others(before)  # comments, order, other plugins: byte for byte
    assert v.edit(after, WANTED) == after  # converged: no second write
    parsed_before, parsed_after = yaml.safe_load(before), yaml.safe_load(after)
    assert parsed_after.get("configurations") == parsed_before.get("configurations")


def test_edit_in_place_keeps_comments_and_order_of_an_existing_plugin() -> None:
    after = v.edit((DATA / "vgpu.conf").read_text(), {v.POLICY: "spread", v.WEIGHT: 20})
    assert after == (
        'actions: "enqueue, allocate, backfill"\n'
        "tiers:\n"
        "- plugins:\n"
        "  - name: predicates\n"
        "  - name: deviceshare\n"
        "    arguments:\n"
        "      deviceshare.VGPUEnable: true\n"
        "      deviceshare.SchedulePolicy: spread      # binpack / spread\n"
        "      deviceshare.ScheduleWeight: 20           # >0 to enable device-level node "
        "scoring (optional)\n"
        "      deviceshare.GPUExclusiveRules:           # optional (>=1.15)\n"
        "        - workloadType: training\n"
    )


def test_missing_plugin_goes_after_predicates_in_its_tier() -> None:
    after = v.edit((DATA / "no-deviceshare.conf").read_text(), {v.ENABLE_VNPU: True})
    lines = after.splitlines()
    at = lines.index("  - name: deviceshare")
    assert lines[at - 2 : at + 4] == [
        "    arguments:",
        "      predicates.GPUSharingEnable: false",
        "  - name: deviceshare",
        "    arguments:",
        "      deviceshare.AscendHAMiVNPUEnable: true",
        "  # scoring below",
    ]


def test_removing_owned_arguments_keeps_the_rest() -> None:
    before = (DATA / "hami-vnpu.conf").read_text()
    after = v.edit(before, {v.CM_NAME: None, v.CM_NAMESPACE: None})
    assert v.arguments(after) == {v.ENABLE_VNPU: True, v.POLICY: "binpack"}
    assert _others(after) == _others(before)


def test_unchanged_arguments_return_the_same_text() -> None:
    before = (DATA / "hami-vnpu.conf").read_text()
    assert v.edit(before, {v.ENABLE_VNPU: True, v.POLICY: "binpack"}) is before


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        (
            "  - {name: deviceshare}\n",
            "  - {name: deviceshare, arguments: {deviceshare.SchedulePolicy: spread}}\n",
        ),
        (
            "  - name: deviceshare\n    arguments: {deviceshare.VGPUEnable: true}\n",
            "  - name: deviceshare\n    arguments: {deviceshare.VGPUEnable: true, "
            "deviceshare.SchedulePolicy: spread}\n",
        ),
        (
            "  - name: deviceshare\n",
            "  - name: deviceshare\n    arguments:\n      deviceshare.SchedulePolicy: spread\n",
        ),
        (
            "  - name: deviceshare\n    arguments:\n",
            "  - name: deviceshare\n    arguments:\n      deviceshare.SchedulePolicy: spread\n",
        ),
    ],
)
def test_flow_and_empty_forms(plugin: str, expected: str) -> None:
    head = "tiers:\n- plugins:\n  - name: predicates\n"
    tail = "  - name: nodeorder  # last\n"
    assert v.edit(head + plugin + tail, {v.POLICY: "spread"}) == head + expected + tail


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("tiers:\n- plugins:\n  - name: [predicates\n", 4, 1),
        ("actions: x\ntiers:\n  - plugins:\n    - name: a\n   bad: 1\n", 5, 4),
        ("tiers: {}\n", 1, 8),
        ("- a\n- b\n", 1, 1),
        ("tiers:\n- plugins:\n  - arguments: {}\n", 3, 5),
    ],
)
def test_unparseable_conf_names_line_and_column(text: str, line: int, column: int) -> None:
    with pytest.raises(v.ConfInvalid) as err:
        v.edit(text, WANTED)
    assert (err.value.line, err.value.column) == (line, column)
    assert f"line {line}, column {column}" in str(err.value)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (0, "0"),
        ("binpack", "binpack"),
        ("true", '"true"'),
        ("a: b", '"a: b"'),
        ("", '""'),
    ],
)
def test_scalars_read_back_as_themselves(value: v.Scalar, text: str) -> None:
    assert v.scalar(value) == text
    assert yaml.safe_load(f"k: {text}")["k"] == value


BASE = "tiers:\n- plugins:\n  - name: predicates\n  - name: deviceshare\n    arguments:\n"


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ("      deviceshare.SchedulePolicy:\n", "empty (null)"),
        ("      deviceshare.SchedulePolicy: >-\n        binpack\n", "a block scalar"),
        ("      x: &p binpack\n      deviceshare.SchedulePolicy: *p\n", "an alias"),
    ],
)
def test_values_tessera_cannot_rewrite_are_refused_at_the_persons_line(
    arguments: str, why: str
) -> None:
    text = BASE + arguments
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "SchedulePolicy" in x)
    with pytest.raises(v.ConfInvalid) as err:
        v.edit(text, {v.POLICY: "spread"})
    assert why in str(err.value) and (err.value.line, err.value.column) == (line, 7)


def test_quoted_values_keep_their_quotes() -> None:
    text = BASE + '      deviceshare.SchedulePolicy: "binpack"\n'
    assert v.edit(text, {v.POLICY: "spread"}) == text.replace('"binpack"', '"spread"')
