"""The operator image's contents without a Docker engine: the wheel, in a clean venv.

The Dockerfile's build stage does exactly this (pip wheel, then install the wheel into a new
virtual environment); here the same steps run on the test machine, and the installed
``tessera`` entry point must start. The Dockerfile's own promises are checked as text.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_wheel_installs_into_a_clean_venv_and_tessera_runs(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("tessera_operator-*.whl")
    # The simulators (devcluster/, a distribution of its own) are not in the wheel.
    with zipfile.ZipFile(wheel) as archive:
        files = archive.namelist()
    assert "tessera/cli/main.py" in files and "tessera/domain/geometry/placement.py" in files
    simulators = [f for f in files if "devcluster" in f or f.split("/")[0] == "devcluster"]
    assert simulators == []
    assert all(f.startswith(("tessera/", "tessera_operator-")) for f in files), files
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, str(wheel)], check=True, timeout=600)
    out = subprocess.run(
        [str(env / "bin" / "tessera"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not the repository: the import must come from the venv
        timeout=60,
    )
    assert out.stdout.strip() == f"tessera {VERSION}"  # pyproject's, read by the installed package
    # Every sub-command's module is in the wheel (argparse imports them all for --help).
    help_text = subprocess.run(
        [str(env / "bin" / "tessera"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("run", "agent", "geometry"):
        assert command in help_text
    # No simulator module can be imported, and `tessera dev` says what it needs.
    python = str(env / "bin" / "python")
    for module in ("tessera.devcluster", "devcluster", "devcluster.gpunode"):
        missing = subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, text=True, cwd=tmp_path
        )
        assert missing.returncode == 1 and "ModuleNotFoundError" in missing.stderr, module
    dev = subprocess.run(
        [str(env / "bin" / "tessera"), "dev", "demo"], capture_output=True, text=True, cwd=tmp_path
    )
    assert dev.returncode == 1
    assert "tessera dev needs a checkout with `make dev`" in dev.stderr


def test_the_image_copies_no_simulator() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, re.M)
    assert copied and not any("devcluster" in c for c in copied)
    assert "devcluster" in (ROOT / ".dockerignore").read_text().split()


def test_the_dockerfile_is_multi_stage_pinned_and_non_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base.group(1))
    assert len(re.findall(r"^FROM ", text, re.M)) == 2
    assert re.search(r"^USER 65532:65532$", text, re.M)
    assert 'ENTRYPOINT ["tessera"]' in text
