"""The folder `operator/` ships as `tessera` without shadowing the stdlib `operator`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _package_folders() -> set[str]:
    found = set()
    for root, prefix in ((ROOT / "operator", "tessera"), (ROOT / "api", "tessera.api")):
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root).parts
            found.add(".".join((prefix, *rel)))
    return found


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    assert _package_folders() - listed == set()


def test_the_dev_cluster_is_a_distribution_of_its_own_not_a_package_of_the_operator() -> None:
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert not [p for p in listed if "devcluster" in p]
    assert not (ROOT / "operator" / "devcluster").exists()
    own = tomllib.loads((ROOT / "devcluster" / "pyproject.toml").read_text())
    assert own["tool"]["setuptools"]["packages"] == ["devcluster"]
    assert own["project"]["entry-points"]["tessera.cli"] == {"dev": "devcluster.cli:register"}


def test_stdlib_operator_and_tessera_both_import_from_the_repository_root() -> None:
    code = "import operator, tessera; assert operator.eq(1, 1); print(tessera.__version__)"
    for argv in ([sys.executable, "-c", code], [sys.executable, "-m", "pytest", "--version"]):
        result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
