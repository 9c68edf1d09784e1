"""Every ``tessera`` command answers ``--help`` (exit 0), and usage errors exit as documented:
2, except under ``tessera plan``, whose contract gives 2 to "changes" — there a usage error is 1."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tessera.cli.main import build_parser, main


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, (*path, name))
    return found


COMMANDS = _commands(build_parser())


def test_the_table_covers_every_command() -> None:
    assert len(COMMANDS) > 10
    assert ("plan", "snapshot") in COMMANDS and ("geometry", "pack") in COMMANDS


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "tessera")
def test_help_exits_0(command: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: tessera {' '.join(command)}".rstrip())


def _usage_status(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["plan", "--bogus"], 1),
        (["plan", "-f", "x.yaml", "--bogus"], 1),
        (["plan", "-o", "yaml", "-f", "x.yaml"], 1),
        (["plan", "--kubeconfig", "k", "--snapshot", "s", "-f", "x.yaml"], 1),
        (["plan", "-f"], 1),
        (["plan", "snapshot", "--bogus"], 1),
        (["plan", "snapshot", "--vnpu-configmap", "no-slash"], 1),
        (["--bogus"], 2),
        (["geometry", "pack", "--bogus"], 2),
        (["geometry", "check", "--model"], 2),
        (["run", "--bogus"], 2),
    ],
)
def test_usage_errors_exit_as_each_command_documents(
    argv: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _usage_status(argv) == code
    err = capsys.readouterr().err
    assert "usage: tessera" in err and "error:" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "-f", "a.yaml", "b.yaml"],
        ["plan", "-f", "a.yaml", "b.yaml", "c.yaml"],
        ["plan", "--prune", "-f", "a.yaml", "b.yaml", "-o", "json"],
    ],
)
def test_two_paths_after_one_f_are_a_usage_error_that_says_f_takes_one_path(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse read b.yaml as a sub-command: "invalid choice: 'b.yaml' (choose from ...)"."""
    assert _usage_status(argv) == 1
    err = capsys.readouterr().err
    assert "usage: tessera plan" in err and "invalid choice" not in err
    assert "'b.yaml' is no command of tessera plan (only snapshot)" in err
    assert "-f takes one path, so each manifest needs its own -f: ... -f b.yaml" in err


@pytest.mark.parametrize(("argv", "code"), [(["plan", "--bogus"], 1), (["plan", "-o", "yaml"], 1), (["geometry", "--bogus"], 2)])  # fmt: skip
def test_usage_errors_exit_the_same_as_a_module(argv: list[str], code: int) -> None:
    """``python -m tessera.cli.main`` (as tests and scripts run it) loads main as __main__."""
    run = [sys.executable, "-m", "tessera.cli.main", *argv]
    assert subprocess.run(run, capture_output=True, timeout=60).returncode == code


def test_a_reader_that_stops_reading_gets_no_traceback() -> None:
    """``tessera geometry list ... | head -1`` printed a BrokenPipeError traceback."""
    command = f"{sys.executable} -m tessera.cli.main geometry list --model H100-80GB | head -1"
    run = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() and "Traceback" not in run.stderr, run.stderr
