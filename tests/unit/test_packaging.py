"""A module's path is its import name, and the folder `operator/` shadows nothing.

The package ``tessera`` spans two roots, ``operator/`` and ``api/`` (setup.py finds the
packages under both); under each root, a file's path is the module it is imported as.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOTS = (ROOT / "operator", ROOT / "api")
MODULES = sorted(
    (path.relative_to(root).with_suffix(""), path)
    for root in ROOTS
    for path in root.rglob("*.py")
    if "__pycache__" not in path.parts
)


def _name(relative: Path) -> str:
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


@pytest.mark.parametrize(("relative", "path"), MODULES, ids=[str(m[0]) for m in MODULES])
def test_every_module_imports_from_its_own_path(relative: Path, path: Path) -> None:
    name = _name(relative)
    assert name.split(".")[0] == "tessera", f"{path} is outside the tessera package"
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    assert Path(spec.origin).resolve() == path.resolve()


def test_tessera_is_one_namespace_across_both_roots() -> None:
    """No ``__init__`` at either root's ``tessera/``: one package, its subpackages in two places."""
    assert not [r for r in ROOTS if (r / "tessera" / "__init__.py").exists()]
    spec = importlib.util.find_spec("tessera")
    assert spec is not None and spec.origin is None  # a namespace package (PEP 420)
    roots = {_root(name) for name in ("tessera.domain", "tessera.api")}
    assert roots == {r.resolve() for r in ROOTS}


def _root(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    return Path(spec.origin).resolve().parents[2]


def test_the_dev_cluster_is_a_distribution_of_its_own_not_a_package_of_the_operator() -> None:
    assert not list(ROOT.glob("*/tessera/**/devcluster"))
    own = tomllib.loads((ROOT / "devcluster" / "pyproject.toml").read_text())
    assert own["tool"]["setuptools"]["packages"] == ["devcluster"]
    assert own["project"]["entry-points"]["tessera.cli"] == {"dev": "devcluster.cli:register"}


def test_stdlib_operator_and_tessera_both_import_from_the_repository_root() -> None:
    code = "import operator, tessera.cli.main as m; assert operator.eq(1, 1); print(m.VERSION)"
    for argv in ([sys.executable, "-c", code], [sys.executable, "-m", "pytest", "--version"]):
        result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr


def test_no_two_classes_of_the_product_share_a_name() -> None:
    """One word, one concept: a grep for a class lands on the one it means."""
    where: dict[str, list[str]] = {}
    for relative, path in MODULES:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(_name(relative))
    assert {name: mods for name, mods in where.items() if len(mods) > 1} == {}
