"""The persisted node state: round trips, compactness, and refusing garbage."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as hs
from rollout_builders import T0, secs, state, target

from builders.views import NEW
from tessera.domain.rollout.state import (
    Eviction,
    NodeState,
    Phase,
    StateError,
    decode,
    encode,
)

FULL = replace(
    state(Phase.BLOCKED, message="pdb ml/a allows 0 disruptions"),
    rollback_of=NEW,
    evictions={"ml/a@u1": Eviction(2, T0 - secs(5)), "ml/b": Eviction(1, T0, deleted=True)},
)


@pytest.mark.parametrize(
    "s", [state(Phase.CORDONED), FULL, replace(FULL, phase=Phase.FAILED, rolled_back=True)]
)
def test_round_trip(s: NodeState) -> None:
    assert decode(encode(s)) == s


def test_encoding_is_compact_and_stable() -> None:
    text = encode(FULL)
    assert " " not in text.replace("pdb ml/a allows 0 disruptions", "")
    assert encode(decode(text) or FULL) == text
    assert json.loads(text)["v"] == 1


@given(
    phase=hs.sampled_from(list(Phase)),
    orig=hs.booleans(),
    minutes=hs.integers(0, 10**6),
    attempts=hs.integers(0, 50),
    msg=hs.text(max_size=40),
)
def test_round_trip_property(
    phase: Phase, orig: bool, minutes: int, attempts: int, msg: str
) -> None:
    s = replace(
        state(phase, since=T0 + secs(60 * minutes)),
        orig=orig,
        message=msg,
        evictions={"ns/p": Eviction(attempts, T0)},
    )
    assert decode(encode(s)) == s


def test_absent_is_none() -> None:
    assert decode(None) is None
    assert decode("") is None


GOOD = json.loads(encode(state(Phase.DRAINING)))


@pytest.mark.parametrize(
    "raw",
    [
        "{",
        "[]",
        "null",
        json.dumps({**GOOD, "v": 2}),
        json.dumps({**GOOD, "phase": "Exploded"}),
        json.dumps({**GOOD, "orig": "false"}),
        json.dumps({**GOOD, "owner": ""}),
        json.dumps({**GOOD, "since": "yesterday"}),
        json.dumps({**GOOD, "target": {"labels": {}}}),
        json.dumps({**GOOD, "target": {"id": "x", "labels": {"a": 1}}}),
        json.dumps({**GOOD, "target": {"id": "x", "alloc": {"a": "1"}}}),
        json.dumps({**GOOD, "ev": {"ns/p": [1]}}),
        json.dumps({**GOOD, "ev": []}),
        "[" * 100000,
    ],
)
def test_garbage_is_a_state_error(raw: str) -> None:
    with pytest.raises(StateError):
        decode(raw)


@given(hs.text(max_size=200))
def test_any_text_decodes_or_raises_state_error(raw: str) -> None:
    with contextlib.suppress(StateError):
        decode(raw)


@given(
    hs.recursive(
        hs.none() | hs.booleans() | hs.integers() | hs.text(max_size=5),
        lambda kids: (
            hs.lists(kids, max_size=3) | hs.dictionaries(hs.text(max_size=6), kids, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_any_json_decodes_or_raises_state_error(value: object) -> None:
    merged = {**GOOD, "target": value} if isinstance(value, dict) else value
    with contextlib.suppress(StateError):
        decode(json.dumps(merged))


def test_target_survives_with_removals() -> None:
    s = replace(state(Phase.VERIFYING), target=replace(target(NEW), labels={"a": None}))
    assert decode(encode(s)) == s
