"""A real, throw-away Kubernetes control plane on loopback.

Integration tests and ``make demo`` need the genuine API server — admission,
CEL validation, the Eviction API, PodDisruptionBudgets, ResourceQuota
enforcement, scheduling — so we run etcd, kube-apiserver (RBAC on, a static admin
token, service-account keys), kube-controller-manager (all default controllers),
kube-scheduler, built from Go modules by ``hack/controlplane/build.sh``, and KWOK for node
and pod lifecycles (:mod:`.scheduling`). Everything lives in one temporary directory
and one process group per binary, so ``stop()`` leaves nothing behind even when a test fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from devcluster.scheduling import (
    ALL_CONTROLLERS,
    Scheduling,
    client_args,
    controller_manager_args,
    kwok_args,
    kwok_config,
    scheduler_args,
)

ADMIN_TOKEN = "tessera-admin-token"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
# KEP-5055 device taints, alpha and off in 1.34: the gate on kube-apiserver (DeviceTaintRule and
# the slices' and claims' taint fields), kube-controller-manager (its device-taint-eviction
# controller) and kube-scheduler (its allocator skips a device whose taint the request does not
# tolerate, DeviceTaintRules applied: ``resourceslice/tracker``), and the alpha group version
# that serves ``devicetaintrules`` on the API server.
DEVICE_TAINT_GATES = "--feature-gates=DRADeviceTaints=true"
DEVICE_TAINT_RULES_API = "--runtime-config=resource.k8s.io/v1alpha3=true"


class ControlPlaneError(RuntimeError):
    """The control plane could not start; the message names the component and its log."""


def find_binaries() -> Path:
    """Where the control-plane binaries are: the env override, else build or reuse the cache."""
    for var in ("TESSERA_CONTROLPLANE_BIN", "KUBEBUILDER_ASSETS"):
        preset = os.environ.get(var)
        if preset:
            return Path(preset)
    script = Path(__file__).resolve().parents[1] / "hack" / "controlplane" / "build.sh"
    out = subprocess.run([str(script)], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK in ``workdir``."""

    bin_dir: Path
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tessera-cp-")))
    api_port: int = field(default_factory=free_port)
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    keep_workdir: bool = False
    scheduling: Scheduling = field(default_factory=Scheduling)  # scheduler and KWOK options
    # DRADeviceTaints on every component and DeviceTaintRule served; False: a 1.34 cluster as
    # it comes (the rule is not served, a pool falls back to holding the node)
    device_taints: bool = True
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _logs: list[IO[bytes]] = field(default_factory=list)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "apiserver.crt"

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    def log(self, component: str) -> Path:
        return self.workdir / f"{component}.log"

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> ControlPlane:
        try:
            self._prepare_files()
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._start_controller_manager()
            self._start_scheduling(self.scheduling, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM every component (newest first), then SIGKILL what is left; remove the workdir."""
        for name in reversed(list(self.processes)):
            _terminate(self.processes[name])
        self.processes.clear()
        for handle in self._logs:
            handle.close()
        self._logs.clear()
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def restart_apiserver(self, timeout: float = 120.0) -> None:
        """Kill and restart kube-apiserver on the same port (fault-injection tests)."""
        _terminate(self.processes.pop("kube-apiserver"))
        self._start_apiserver(timeout)

    def check_alive(self, *names: str) -> None:
        """Raise ControlPlaneError naming the first of ``names`` (default: all) that exited."""
        for name in names or tuple(self.processes):
            proc = self.processes[name]
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with {proc.returncode}; see {self.log(name)}:\n"
                    + _tail(self.log(name))
                )

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- pieces --------------------------------------------------------------------------------

    def _prepare_files(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        key, pub = pki / "sa.key", pki / "sa.pub"
        if not key.exists():
            subprocess.run(
                ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
            )
            subprocess.run(
                ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
                check=True,
                capture_output=True,
            )
        (self.workdir / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n')

    def _spawn(
        self,
        name: str,
        args: list[str],
        binary: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        binary = binary or self.bin_dir / name
        if not binary.is_file():
            raise ControlPlaneError(f"{name}: no binary at {binary}")
        handle = self.log(name).open("ab")
        self._logs.append(handle)
        self.processes[name] = subprocess.Popen(
            [str(binary), *args],
            env={**os.environ, **env} if env else None,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # own process group: a stray child cannot outlive stop()
        )

    def _start_etcd(self, timeout: float) -> None:
        url = f"http://127.0.0.1:{self.etcd_port}"
        self._spawn(
            "etcd",
            [
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait("etcd", f"{url}/health", timeout)

    def _start_apiserver(self, timeout: float) -> None:
        pki = self.workdir / "pki"
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--cert-dir={pki}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                f"--token-auth-file={self.workdir / 'tokens.csv'}",
                "--enable-priority-and-fairness=false",
                "--v=1",
                *self._gates(DEVICE_TAINT_RULES_API),
            ],
        )
        self._wait("kube-apiserver", f"{self.server}/readyz", timeout)
        # The API server wrote a self-signed serving certificate and its CA into apiserver.crt.
        self.kubeconfig.write_text(kubeconfig_text(self.server, ADMIN_TOKEN, self.ca_file))

    def _start_controller_manager(self) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--controllers={','.join(ALL_CONTROLLERS)}",
                f"--service-account-private-key-file={self.workdir / 'pki' / 'sa.key'}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--resource-quota-sync-period=15s",
                "--v=1",
                *self._gates(),
                *controller_manager_args(self.scheduling),
            ],
        )

    def _start_scheduling(self, options: Scheduling, timeout: float) -> None:
        port = free_port()
        args = scheduler_args(self.kubeconfig, port) + client_args(options) + self._gates()
        self._spawn("kube-scheduler", args)
        self._wait("kube-scheduler", f"https://127.0.0.1:{port}/readyz", timeout)
        port = free_port()
        config = kwok_config(options, self.workdir)
        args = kwok_args(options, self.kubeconfig, config, port)
        # KWOK_WORKDIR: the controller reads no ~/.kwok/kwok.yaml of whoever runs the tests
        self._spawn("kwok", args, options.kwok_bin, {"KWOK_WORKDIR": str(self.workdir / "kwok")})
        self._wait("kwok", f"http://127.0.0.1:{port}/healthz", timeout)

    def _gates(self, *more: str) -> list[str]:
        """The device-taint flags every component gets (``device_taints``), and ``more``."""
        return [DEVICE_TAINT_GATES, *more] if self.device_taints else []

    def _wait(self, name: str, url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        last_error = ""
        while time.monotonic() < deadline:
            self.check_alive(name)
            try:
                with urllib.request.urlopen(url, timeout=2, context=insecure) as resp:
                    if resp.status == 200:
                        return
            except OSError as exc:
                last_error = str(exc)
            time.sleep(0.1)  # polling a health endpoint with a deadline, not synchronising
        raise ControlPlaneError(
            f"{name} not healthy at {url} after {timeout:.0f}s: {last_error}; see"
            f" {self.log(name)}:\n" + _tail(self.log(name))
        )


def kubeconfig_text(server: str, token: str, ca_file: Path, user: str = "admin") -> str:
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: tessera-dev\n  cluster:\n    server: {server}\n"
        f"    certificate-authority: {ca_file}\n"
        f"users:\n- name: {user}\n  user:\n    token: {token}\n"
        f"contexts:\n- name: tessera-dev\n  context:\n    cluster: tessera-dev\n    user: {user}\n"
        "current-context: tessera-dev\n"
    )


def _terminate(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
