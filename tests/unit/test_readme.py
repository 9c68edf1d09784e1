"""What a newcomer meets first: a README that fits a few screens and opens with the two commands,
and a venv step that prints Tessera's line, not the build backend's warnings.

Depth lives in docs/ (the README links it); the examples the integration tests apply verbatim
are in docs/examples.md.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LIMIT = 12 * 1024  # bytes


def test_the_readme_stays_under_12_kb() -> None:
    size = len(README.read_bytes())
    assert size <= LIMIT, f"README.md is {size} bytes (limit {LIMIT}): move depth into docs/"


def test_the_readme_starts_with_make_demo_and_make_test() -> None:
    text = README.read_text()
    first = re.match(r"# Tessera\n\n```sh\n(.*?)```\n", text, re.S)
    assert first is not None, text[:300]
    commands = [line.split("#", 1)[0].strip() for line in first[1].splitlines()]
    assert commands == ["make demo", "make test"]


def test_every_docs_link_of_the_readme_resolves() -> None:
    links = re.findall(r"\]\((docs/[^)#]*)", README.read_text())
    assert "docs/examples.md" in links
    assert [link for link in links if not (ROOT / link).exists()] == []


@pytest.mark.parametrize("pyproject", ["pyproject.toml", "devcluster/pyproject.toml"])
def test_the_license_is_an_spdx_string_on_a_setuptools_that_reads_it(pyproject: str) -> None:
    """A TOML-table license makes setuptools warn on every build (unsupported after
    2027-02-18); the SPDX string (PEP 639) needs setuptools 77."""
    data = tomllib.loads((ROOT / pyproject).read_text())
    assert data["project"]["license"] == "Apache-2.0"
    (setuptools,) = [r for r in data["build-system"]["requires"] if r.startswith("setuptools")]
    floor = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", setuptools)
    assert floor is not None and int(floor[1]) >= 77, setuptools


def test_the_venv_step_prints_one_line_and_filters_only_setuptools_editable_notice() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("$(STAMP): pyproject.toml setup.py devcluster/pyproject.toml\n", 1)[1]
    lines = recipe.split("\n\n", 1)[0].replace("\\\n", " ").splitlines()
    assert all(line.startswith("\t@") for line in lines), lines  # no command echoed
    echoes = [line for line in lines if line.startswith("\t@echo ")]
    assert len(echoes) == 1, lines
    installs = [line for line in lines if " pip install " in line]
    assert all("--quiet" in line for line in installs), installs
    (editable,) = [line for line in installs if " -e " in line]
    assert 'PYTHONWARNINGS="ignore:Editable installation:UserWarning"' in editable
