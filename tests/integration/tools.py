"""Go tools the install tests use (kstatus, helm), built once by hack/build-tool.sh and cached."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@cache
def tool(name: str) -> Path:
    out = subprocess.run(
        [str(ROOT / "hack" / "build-tool.sh"), name],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,  # a cold build downloads its modules first
    )
    return Path(out.stdout.strip().splitlines()[-1])
