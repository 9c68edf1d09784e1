"""``tessera suggest -f``: a demand file in, the patch and its reasons out, plan's exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tessera.cli.main import main

DATA = Path(__file__).resolve().parents[2] / "data" / "demand"


def _write(tmp_path: Path, **over: Any) -> Path:
    doc = yaml.safe_load((DATA / "h100-pending-1g.yaml").read_text())
    doc.update(over)
    path = tmp_path / "demand.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_change_is_a_patch_with_its_reasons_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["suggest", "-f", str(DATA / "h100-pending-1g.yaml")])
    out = capsys.readouterr().out
    assert code == 2
    assert "14 pods want 1g.10gb for 6 min; GPU 6 is idle on each of the 4 node(s)" in out
    patch = yaml.safe_load(out.split("commit it to the manifest\n", 1)[1])
    assert patch == {
        "spec": {
            "mig": {
                "layouts": [
                    {"devices": "all", "profiles": {"7g.80gb": 1}},
                    {"devices": "6", "profiles": {"3g.40gb": 1, "1g.10gb": 4}},
                ]
            }
        }
    }


def test_busy_indexes_are_never_in_the_patch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    used = {"node-1": {i: {"7g.80gb": 1} for i in range(6)}}
    pending = [{"profile": "1g.10gb", "pods": 40, "for": "10m"}]
    code = main(["suggest", "-o", "json", "-f", str(_write(tmp_path, used=used, pending=pending))])
    body = yaml.safe_load(capsys.readouterr().out)
    assert code == 2
    changed = {lay["devices"] for lay in body["patch"]["spec"]["mig"]["layouts"][1:]}
    assert changed == {"6", "7"}  # 40 pods on 4 nodes: 10 a node, 7 at GPU 6 and 3 at GPU 7
    assert body["unmet"] == {}


@pytest.mark.parametrize(
    "over, want_text",
    [
        pytest.param(
            {"used": {"node-3": {i: {"7g.80gb": 1} for i in range(8)}}},
            "nothing fits: 1g.10gb x4 — all 8 GPUs hold pods",
            id="nothing-fits-said-plainly",
        ),
        pytest.param(
            {"pending": [{"profile": "1g.10gb", "pods": 14, "for": "2m"}]},
            "14 pods pend, none yet for 5 min (the pend threshold)",
            id="below-the-threshold",
        ),
        pytest.param(
            {"bounds": {"enabled": False}},
            "the autopilot is off",
            id="off-switch",
        ),
    ],
)
def test_no_change_exits_0_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], over: dict[str, Any], want_text: str
) -> None:
    code = main(["suggest", "-f", str(_write(tmp_path, **over))])
    out = capsys.readouterr().out
    assert code == 0
    assert want_text in out
    assert "No change." in out


@pytest.mark.parametrize(
    "over, want_error",
    [
        pytest.param({"pending": "lots"}, "pending: a list, not str", id="pending-not-a-list"),
        pytest.param(
            {"pending": [{"profile": "1g.10gb", "pods": 3, "for": "soon"}]},
            "pending[0].for: not a duration: 'soon'",
            id="unreadable-wait",
        ),
        pytest.param({"model": "H900"}, "model: unknown GPU model 'H900'", id="unknown-model"),
        pytest.param(
            {"bounds": {"minimum": {"1g.10gb": 9}, "maximum": {"1g.10gb": 2}}},
            "minimum[1g.10gb] is 9, above maximum[1g.10gb] 2",
            id="min-above-max",
        ),
        pytest.param({"pods": 3}, "unknown field(s) pods", id="stray-field"),
        pytest.param(
            {"layouts": [{"devices": "all", "profiles": {"5g.50gb": 1}}]},
            "H100-80GB has no profile 5g.50gb",
            id="layout-with-an-unknown-profile",
        ),
    ],
)
def test_a_demand_it_cannot_read_is_an_error_never_no_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], over: dict[str, Any], want_error: str
) -> None:
    code = main(["suggest", "-f", str(_write(tmp_path, **over))])
    captured = capsys.readouterr()
    assert code == 1
    assert want_error in captured.err
    assert "No change" not in captured.out


def test_a_missing_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["suggest", "-f", str(tmp_path / "absent.yaml")]) == 1
    assert "absent.yaml" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["suggest"], id="neither-pool-nor-file"),
        pytest.param(["suggest", "h100", "-f", str(DATA / "h100-pending-1g.yaml")], id="both"),
        pytest.param(
            ["suggest", "-f", str(DATA / "h100-pending-1g.yaml"), "--pend-threshold", "1m"],
            id="cluster-flag-with-a-file",
        ),
        pytest.param(["suggest", "h100", "--pend-threshold", "soon"], id="bad-threshold"),
        pytest.param(
            ["suggest", "h100", "--kubeconfig", "/nonexistent/kubeconfig"], id="no-cluster"
        ),
        pytest.param(["suggest", "--from-status"], id="from-status-without-pool"),
        pytest.param(
            ["suggest", "--from-status", "-f", str(DATA / "h100-pending-1g.yaml")],
            id="from-status-with-a-file",
        ),
        pytest.param(
            ["suggest", "h100", "--from-status", "--pend-threshold", "1m"],
            id="from-status-with-a-threshold",
        ),
        pytest.param(
            ["suggest", "h100", "--from-status", "--kubeconfig", "/nonexistent/kubeconfig"],
            id="from-status-no-cluster",
        ),
    ],
)
def test_usage_and_an_unreadable_cluster_exit_1_never_0(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("tessera suggest: ")
