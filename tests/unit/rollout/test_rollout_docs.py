"""docs/rollout.md draws the transition table as it is: regenerate it with ``make docs``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tessera.domain.rollout import diagram, state

DOC = Path(__file__).resolve().parents[3] / "docs" / "rollout.md"


def test_the_committed_diagram_is_the_one_the_table_draws() -> None:
    text = DOC.read_text()
    assert diagram.BEGIN in text and diagram.END in text
    assert diagram.render(text) == text, "docs/rollout.md is stale: run `make docs`"


def test_the_diagram_draws_every_edge_once() -> None:
    arrows = [line for line in diagram.mermaid().splitlines() if "-->" in line]
    assert len(arrows) == len(state.edges())
    assert "    [*] --> Cordoned: gates open, a slot free" in arrows


def test_an_edited_diagram_is_caught() -> None:
    text = DOC.read_text().replace("Cordoned --> Draining", "Cordoned --> Verifying", 1)
    assert diagram.render(text) != text


def test_an_edge_without_a_label_cannot_be_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(diagram.LABELS, (state.Phase.BLOCKED, state.Phase.DRAINING))
    with pytest.raises(ValueError, match="label every edge"):
        diagram.mermaid()


def test_every_state_has_its_prose() -> None:
    text = DOC.read_text()
    for phase in state.ReportPhase:
        assert f"**{phase.value}" in text, phase
