"""Kueue's controller manager (sigs.k8s.io/kueue v0.17.0), run for real against the dev cluster.

Built from Go modules by ``hack/build-tool.sh kueue`` (cached like the control plane), which
puts next to the binary the CRDs and webhook configurations exactly as the module ships them
(``config/components/crd/bases``, ``config/components/webhook/manifests.yaml``). ``start``:

1. installs the CRDs and waits until they are Established;
2. makes a CA and a serving certificate for ``127.0.0.1`` (openssl), written where Kueue reads
   them: its webhook ``certDir`` and ``/etc/kueue/metrics/certs``. Kueue v0.17 reads the
   metrics certificate from that fixed path whenever its own certificate management is off
   (``cmd/kueue/main.go``), so it runs in a private mount namespace (``unshare -m``, and
   ``--map-root-user`` when not root) whose ``/etc`` is an overlay: the certificates are
   visible to it alone, nothing is written to the machine's ``/etc``;
3. starts Kueue (leader election off, the ``batch/job`` integration only, the visibility
   server off: it would bind a fixed port) and waits for ``/readyz``;
4. registers the module's webhook configurations for Jobs and Kueue's own kinds, each
   webhook's service reference turned into ``url: https://127.0.0.1:<port><path>`` with the
   CA as ``caBundle``, and waits until the API server calls them (a dry-run ResourceFlavor
   is defaulted by Kueue).

``stop`` removes the webhook configurations first (every Job of the cluster passes through
them, ``failurePolicy: Fail``), then stops Kueue. The CRDs stay, as they would on a cluster.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from devcluster.controlplane import free_port
from tessera.adapters.kube import ApiError, Kube

NAMESPACE = "kueue-system"
WEBHOOK_PREFIX = "tessera-dev-kueue-"
METRICS_CERTS = "/etc/kueue/metrics/certs"
KEPT_GROUPS = {"batch", "kueue.x-k8s.io"}  # Jobs and Kueue's kinds: the integrations enabled
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WEBHOOK_API = "/apis/admissionregistration.k8s.io/v1"
# a private mount namespace; without root, inside a user namespace that maps us to root there
UNSHARE = [
    "unshare",
    *([] if os.geteuid() == 0 else ["--map-root-user"]),
    "-m",
    "--propagation",
    "private",
]
BUILD_TIMEOUT = 1800.0  # a cold build of Kueue on two busy cores: about 13 minutes


class KueueError(RuntimeError):
    """Kueue could not be installed or started; the message says which step and shows its log."""


def binary() -> Path:
    """The cached Kueue binary (built on first use); its manifests lie next to it."""
    preset = os.environ.get("TESSERA_KUEUE_BIN")
    if preset:
        return Path(preset)
    from devcluster.build_tool import build_tool

    return build_tool("kueue", timeout=BUILD_TIMEOUT)


@dataclass
class Kueue:
    kube: Kube
    kubeconfig: Path
    workdir: Path
    bin: Path = field(default_factory=binary)
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    ca_bundle: str = ""  # base64 of the CA that signed the webhook certificate
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    @property
    def crds(self) -> Path:
        return self.bin.parent / "kueue-crds"

    @property
    def webhooks(self) -> Path:
        return self.bin.parent / "kueue-webhooks.yaml"

    @property
    def log(self) -> Path:
        return self.workdir / "kueue.log"

    def start(self, timeout: float = 120.0) -> Kueue:
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            self.install_crds(timeout)
            self._certificates()
            self._namespace()
            self._spawn()
            self._wait_ready(timeout)
            self._register_webhooks(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for kind in ("Mutating", "Validating"):
            with contextlib.suppress(ApiError, OSError):
                self.kube.delete(_webhook_path(kind))
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Kueue:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- steps ---------------------------------------------------------------------------------

    def install_crds(self, timeout: float) -> None:
        names = []
        for path in sorted(self.crds.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            names.append(crd["metadata"]["name"])
            try:
                self.kube.create(CRD_API, crd)
            except ApiError as err:
                if not err.conflict:
                    raise
        for name in names:
            self._until(
                lambda n=name: _established(self.kube.get(f"{CRD_API}/{n}")),
                timeout,
                f"CRD {name} Established",
            )

    def _certificates(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(exist_ok=True)
        ca_key, ca, key, csr, crt = (
            pki / n for n in ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt")
        )
        ext = pki / "san.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        for argv in (
            [
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                ca_key,
                "-out",
                ca,
                "-days",
                "2",
                "-subj",
                "/CN=tessera-dev-kueue-ca",
            ],
            [
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                key,
                "-out",
                csr,
                "-subj",
                "/CN=127.0.0.1",
            ],
            [
                "x509",
                "-req",
                "-in",
                csr,
                "-CA",
                ca,
                "-CAkey",
                ca_key,
                "-CAcreateserial",
                "-out",
                crt,
                "-days",
                "2",
                "-extfile",
                ext,
            ],
        ):
            subprocess.run(["openssl", *map(str, argv)], check=True, capture_output=True)
        for where in (self.workdir / "certs", self.workdir / "metrics-certs"):
            where.mkdir(exist_ok=True)
            shutil.copy(crt, where / "tls.crt")
            shutil.copy(key, where / "tls.key")
        self.ca_bundle = base64.b64encode(ca.read_bytes()).decode()

    def _namespace(self) -> None:
        try:
            self.kube.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        except ApiError as err:
            if not err.conflict:
                raise

    def _config(self) -> Path:
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {
                "port": self.webhook_port,
                "host": "127.0.0.1",
                "certDir": str(self.workdir / "certs"),
            },
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "manageJobsWithoutQueueName": False,
            "integrations": {"frameworks": ["batch/job"]},
        }
        path = self.workdir / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _spawn(self) -> None:
        if not self.bin.is_file():
            raise KueueError(f"kueue: no binary at {self.bin}")
        upper, work = self.workdir / "etc-upper", self.workdir / "etc-work"
        upper.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        script = (
            f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc"
            f" && mkdir -p {METRICS_CERTS}"
            f" && mount --bind {self.workdir / 'metrics-certs'} {METRICS_CERTS}"
            f' && exec "$0" --config={self._config()} --feature-gates=VisibilityOnDemand=false'
            " --zap-log-level=info"
        )
        self._log = self.log.open("ab")
        self.process = subprocess.Popen(
            [*UNSHARE, "sh", "-c", script, str(self.bin)],
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _wait_ready(self, timeout: float) -> None:
        url = f"http://127.0.0.1:{self.health_port}/readyz"

        def ready() -> bool:
            self._check_alive()
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        self._until(ready, timeout, f"Kueue ready at {url}")

    def _register_webhooks(self, timeout: float) -> None:
        for doc in yaml.safe_load_all(self.webhooks.read_text()):
            kind = doc["kind"].removesuffix("WebhookConfiguration")
            body = {
                "apiVersion": doc["apiVersion"],
                "kind": doc["kind"],
                "metadata": {"name": WEBHOOK_PREFIX + kind.lower()},
                "webhooks": [self._local(w) for w in doc["webhooks"] if _kept(w)],
            }
            self.kube.create(_webhook_path(kind, named=False), body)
        probe = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors"
        flavor: dict[str, Any] = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "tessera-dev-probe"},
            "spec": {},
        }

        def called() -> bool:  # Kueue's defaulting webhook gives every flavor its finalizer
            try:
                made = self.kube.create(probe, flavor)
            except ApiError:
                return False
            self.kube.delete(f"{probe}/tessera-dev-probe")
            return "kueue.x-k8s.io/resource-in-use" in (made["metadata"].get("finalizers") or [])

        self._until(called, timeout, "the API server calling Kueue's webhooks")

    def _local(self, webhook: dict[str, Any]) -> dict[str, Any]:
        path = webhook["clientConfig"]["service"].get("path", "")
        url = f"https://127.0.0.1:{self.webhook_port}{path}"
        return {**webhook, "clientConfig": {"url": url, "caBundle": self.ca_bundle}}

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise KueueError(
                f"kueue exited with {self.process.returncode}; see {self.log}:\n{_tail(self.log)}"
            )

    def _until(self, check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.2)  # polling a readiness probe with a deadline, not synchronising
        raise KueueError(f"timed out waiting for {what}; see {self.log}:\n{_tail(self.log)}")


def _webhook_path(kind: str, *, named: bool = True) -> str:
    """``kind``: Mutating or Validating; the harness's configuration of that kind."""
    plural = f"{WEBHOOK_API}/{kind.lower()}webhookconfigurations"
    return f"{plural}/{WEBHOOK_PREFIX}{kind.lower()}" if named else plural


def _kept(webhook: dict[str, Any]) -> bool:
    groups = {g for rule in webhook.get("rules") or [] for g in rule.get("apiGroups") or []}
    return bool(groups) and groups <= KEPT_GROUPS


def _established(crd: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or []
    )


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
