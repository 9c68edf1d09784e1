"""A local control plane that outlives the command that started it (``make demo``).

The state directory records the process groups we started, so a rerun reuses
a healthy cluster (idempotent) and ``tessera dev down`` stops exactly what we
started, nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from devcluster.controlplane import ControlPlane, find_binaries

STATE_FILE = "cluster.json"


@dataclass(frozen=True)
class DevSession:
    state_dir: Path
    kubeconfig: Path
    kubectl: Path
    pids: dict[str, int]

    @property
    def alive(self) -> bool:
        return bool(self.pids) and all(pid_running(pid) for pid in self.pids.values())


def load(state_dir: Path) -> DevSession | None:
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return DevSession(
        state_dir, Path(data["kubeconfig"]), Path(data["kubectl"]), dict(data["pids"])
    )


def save(session: DevSession) -> None:
    session.state_dir.mkdir(parents=True, exist_ok=True)
    (session.state_dir / STATE_FILE).write_text(
        json.dumps(
            {
                "kubeconfig": str(session.kubeconfig),
                "kubectl": str(session.kubectl),
                "pids": session.pids,
            },
            indent=2,
        )
    )


def up(state_dir: Path) -> tuple[DevSession, bool]:
    """Start (or reuse) the control plane; returns the session and whether it is new."""
    existing = load(state_dir)
    if existing and existing.alive:
        return existing, False
    if existing:
        down(state_dir)
    workdir = state_dir.resolve() / "controlplane"
    workdir.mkdir(parents=True, exist_ok=True)
    plane = ControlPlane(find_binaries(), workdir=workdir, keep_workdir=True).start()
    session = DevSession(
        state_dir,
        plane.kubeconfig,
        plane.kubectl,
        {name: proc.pid for name, proc in plane.processes.items()},
    )
    save(session)
    return session, True


def add_process(session: DevSession, name: str, pid: int) -> DevSession:
    updated = DevSession(
        session.state_dir, session.kubeconfig, session.kubectl, {**session.pids, name: pid}
    )
    save(updated)
    return updated


def down(state_dir: Path) -> list[str]:
    """Stop every process group the session started, newest first."""
    session = load(state_dir)
    if session is None:
        return []
    stopped = []
    for name, pid in reversed(list(session.pids.items())):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
            stopped.append(name)
    deadline = time.monotonic() + 15
    while any(pid_running(p) for p in session.pids.values()) and time.monotonic() < deadline:
        time.sleep(0.1)  # waiting for processes to exit, bounded by the deadline
    for pid in session.pids.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    return stopped


def pid_running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie child of ours counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still answers kill(0); treat it as dead.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    return True
