"""hack/build-tool.sh run from Python: the path of a pinned Go tool, or an error saying why not.

The tests (helm, kstatus) and the dev cluster (KWOK) share this, so a tool that cannot be built
fails with the tail of what the script said (on a fresh machine: no Go, no network, a module
the proxy refused), never with a bare CalledProcessError or a hang.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "hack" / "build-tool.sh"
TAIL = 4000  # characters of the script's stderr an error carries


class ToolBuildError(RuntimeError):
    """hack/build-tool.sh failed or ran out of time; the message holds the tail of its stderr."""


def build_tool(name: str, timeout: float) -> Path:
    """Build (or reuse from the cache) tool NAME; a cold build downloads its modules first.

    Past ``timeout`` seconds the script and its ``go`` are stopped (SIGTERM to its process
    group: hack/cache.sh leaves no half-written entry), and the error says how far it got.
    """
    argv = [str(SCRIPT), name]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
            raise ToolBuildError(
                f"hack/build-tool.sh {name} did not finish within {timeout:.0f} s:\n{err[-TAIL:]}"
            ) from None
    if proc.returncode != 0:
        raise ToolBuildError(
            f"hack/build-tool.sh {name} exited with {proc.returncode}:\n{err[-TAIL:]}"
        )
    return Path(out.strip().splitlines()[-1])
