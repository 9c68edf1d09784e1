"""``make demo`` fails when the operator or a vNPU agent was refused a call during this run."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster import demo

DENIED = 'nodes "n-1" is forbidden: User "system:serviceaccount:tessera-agent:tessera-agent"'


@pytest.mark.parametrize(
    ("earlier", "now", "found"),
    [
        ("", "INFO reconciled\n", []),  # a clean run
        ("", f"WARNING {DENIED}\n", [DENIED]),  # refused in this run
        (f"WARNING {DENIED}\n", "INFO reconciled\n", []),  # refused before this run only
        ("", "401 Unauthorized: token rejected\n", ["Unauthorized"]),
        ("", "Traceback (most recent call last):\n", ["Traceback"]),
    ],
)
def test_refusals_count_the_lines_written_since_the_marks(
    tmp_path: Path, earlier: str, now: str, found: list[str]
) -> None:
    operator_log = tmp_path / "operator.log"
    operator_log.write_text(earlier)
    marks = demo.log_marks(tmp_path)
    agent_log = tmp_path / "agents" / "ascend-0" / "agent.log"  # a new agent: read whole
    agent_log.parent.mkdir(parents=True)
    agent_log.write_text(now)
    with operator_log.open("a") as log:
        log.write(now)
    refused = demo.refusals(tmp_path, marks)
    assert len(refused) == 2 * len(found)
    for text, line in zip(found * 2, refused, strict=True):
        assert text in line
    assert {line.split(":")[0] for line in refused} <= {str(operator_log), str(agent_log)}
