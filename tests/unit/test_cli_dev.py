"""``tessera dev`` comes from the dev cluster's ``tessera.cli`` entry point; where the dev
cluster is not installed (the operator's wheel and image) it says what it needs and exits 1."""

from __future__ import annotations

from importlib.metadata import EntryPoint, EntryPoints

import pytest

from tessera.cli import dev
from tessera.cli.main import main


def test_in_a_checkout_the_dev_cluster_provides_tessera_dev(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["dev", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out and "agents" in out and "down" in out


@pytest.mark.parametrize(
    "argv", [["dev"], ["dev", "demo", "--state-dir", ".demo"], ["dev", "down"]]
)
def test_without_the_dev_cluster_tessera_dev_says_so_and_exits_1(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(dev, "entry_points", lambda **_: EntryPoints(()))
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "tessera dev needs a checkout with `make dev`" in err


def test_a_dev_cluster_that_does_not_load_leaves_the_other_commands_working(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = EntryPoint("dev", "devcluster.gone:register", dev.GROUP)
    monkeypatch.setattr(dev, "entry_points", lambda **_: EntryPoints((broken,)))
    assert main(["dev", "demo"]) == 1
    err = capsys.readouterr().err
    assert "needs a checkout with `make dev`" in err and "devcluster.gone" in err
    assert main(["geometry", "models"]) == 0
