"""One real control plane per test session, with Tessera's CRDs installed.

Integration tests talk to a genuine kube-apiserver (RBAC on) backed by etcd,
with kube-controller-manager running all its default controllers, kube-scheduler
placing pods, and KWOK playing the kubelet of every simulated node (heartbeats,
Leases, pod lifecycles). Nothing here is mocked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from devcluster import identity, watchdog
from devcluster.controlplane import ControlPlane, find_binaries, free_port
from tessera.adapters.kube import Kube

from . import sweep

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
        kubectl.ok("apply", "--server-side", "-k", str(ROOT / "crds"))
        kubectl.ok("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        # kubectl cached discovery before the CRDs existed; `explain tq` would not refresh it.
        kubectl.ok("api-resources", "--api-group=tessera.io")
        # Every wait fails at once, naming the component, when the scheduler or KWOK has died
        # (the API server is left out: fault tests restart it on purpose).
        alive = partial(plane.check_alive, "kube-scheduler", "kwok", "kube-controller-manager")
        with watchdog.watching(alive):
            yield plane


@pytest.fixture(scope="module", autouse=True)
def swept(request: pytest.FixtureRequest) -> Iterator[None]:
    """What each module made in the session's cluster goes when it ends (``sweep``)."""
    here = [item for item in request.session.items if item.path == request.path]
    if not any("control_plane" in item.fixturenames for item in here):
        yield  # a module that starts no control plane leaves nothing in one
        return
    kube: Kube = request.getfixturevalue("kube")
    before = sweep.take(kube)
    yield
    sweep.sweep(kube, before)


@pytest.fixture(scope="session")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    return Kubectl(control_plane)


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(str(control_plane.kubeconfig))
    yield client
    client.close()


class OperatorProcess:
    """``tessera run`` as a real process against the test control plane.

    ``kubeconfig`` holds a token of config/rbac's ServiceAccount (``service_account_kubeconfig``,
    or the session operator's): there is no admin default, so no test can run the operator as
    admin by leaving it out. ``metrics_port`` 0 turns /metrics off.
    """

    def __init__(
        self,
        plane: ControlPlane,
        log_path: Path,
        *extra: str,
        kubeconfig: Path,
        metrics_port: int = 0,
    ) -> None:
        self.plane = plane
        self.log_path = log_path
        self.extra = extra
        self.kubeconfig = kubeconfig
        self.metrics_port = metrics_port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def scrape(self) -> str:
        """This process's /metrics, as Prometheus would read it."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            return str(response.read().decode())

    def start(self) -> OperatorProcess:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tessera.cli.main",
                "run",
                f"--kubeconfig={self.kubeconfig}",
                f"--metrics-port={self.metrics_port}",
                "--resync-seconds=5",
                *self.extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def assert_clean_log(self, denials_from: int = 0) -> None:
        """No traceback and no call the API server refused (RBAC: "forbidden") in the log.

        ``denials_from``: the offset in the log from which a refusal counts. Before it the test
        restarted the API server, whose authorizer refuses every ServiceAccount until its RBAC
        informers have synced (``/readyz`` waits for that); the operator must retry those.
        """
        text = self.log()
        early = text[:denials_from].count("\n")
        lines = text.splitlines()
        errors = [
            i
            for i, line in enumerate(lines)
            if "Traceback" in line or ("forbidden" in line and i >= early)
        ]
        context = "\n".join("\n".join(lines[max(i - 2, 0) : i + 25]) for i in errors[:3])
        assert not errors, f"the operator logged {len(errors)} tracebacks or denials:\n{context}"


@pytest.fixture(scope="session")
def rbac(kubectl: Kubectl) -> None:
    """config/rbac installed for real, with the namespaces it names: the operator's (created
    by hand here, config/manager holds its Namespace) and the agent's (config/agent's)."""
    ns = f"{{kind: Namespace, apiVersion: v1, metadata: {{name: {identity.OPERATOR.namespace}}}}}"
    kubectl.ok("apply", "-f", "-", stdin=ns)
    kubectl.ok("apply", "-f", str(ROOT / "config" / "agent" / "namespace.yaml"))
    kubectl.ok("apply", "-k", str(ROOT / "config" / "rbac"))


def service_account_kubeconfig(plane: ControlPlane, path: Path) -> Path:
    """A kubeconfig holding a token of the operator's ServiceAccount (config/rbac).

    The token comes from the TokenRequest API, exactly what the kubelet mounts into the
    operator's pod, so the operator below runs with the permissions of config/rbac and
    nothing else: a verb missing from the ClusterRole fails the test that needs it.
    """
    admin = Kube.from_kubeconfig(str(plane.kubeconfig))
    try:
        bearer = identity.token(admin, identity.OPERATOR)
        return identity.kubeconfig(admin, bearer, identity.OPERATOR.name, path)
    finally:
        admin.close()


@pytest.fixture(scope="session")
def operator(
    control_plane: ControlPlane, rbac: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    folder = tmp_path_factory.mktemp("operator")
    kubeconfig = service_account_kubeconfig(control_plane, folder / "tessera.kubeconfig")
    proc = OperatorProcess(
        control_plane, folder / "operator.log", kubeconfig=kubeconfig, metrics_port=free_port()
    ).start()
    yield proc
    proc.stop()
    proc.assert_clean_log()


@pytest.fixture
def scratch(kubectl: Kubectl) -> Iterator[list[str]]:
    """Namespaces the test creates; deleted afterwards with their never-scheduled pods."""
    made: list[str] = []
    yield made
    for ns in made:
        kubectl.ok("delete", "namespace", ns, "--wait=false")
