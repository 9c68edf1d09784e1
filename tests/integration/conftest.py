"""One real control plane per test session, with Tessera's CRDs installed.

Integration tests talk to a genuine kube-apiserver (RBAC on) backed by etcd,
with kube-controller-manager running the quota, GC, namespace,
service-account and disruption controllers. Nothing here is mocked.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tessera.adapters.kube import Kube
from tessera.devcluster.controlplane import ControlPlane, find_binaries

ROOT = Path(__file__).resolve().parents[2]


class Kubectl:
    """kubectl bound to the test control plane."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.plane.kubectl), f"--kubeconfig={self.plane.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        result = self(*args, stdin=stdin)
        assert result.returncode == 0, f"kubectl {' '.join(args)} failed:\n{result.stderr}"
        return result.stdout


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    plane = ControlPlane(find_binaries())
    with plane:
        kubectl = Kubectl(plane)
        kubectl.ok("apply", "--server-side", "-f", str(ROOT / "crds"))
        kubectl.ok("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        yield plane


@pytest.fixture(scope="session")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    return Kubectl(control_plane)


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(str(control_plane.kubeconfig))
    yield client
    client.close()
