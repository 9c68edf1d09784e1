"""KubeVirt's answer to the eviction of a live-migratable VM, played through the real API server.

KubeVirt's virt-api registers a validating admission webhook on ``pods/eviction``. The eviction
of a virt-launcher pod whose VM can live-migrate is *refused* with 429 ("Eviction triggered
evacuation of VMI") and marks the VM for evacuation; virt-controller then migrates the VM to
another node and the source pod completes: the pod leaves later, not because of the eviction
(KubeVirt design proposal "Handling Eviction Requests"; user guide "Node maintenance").

Here a real HTTPS admission webhook (a self-signed certificate from ``openssl``) is registered
with the kube-apiserver as a ValidatingWebhookConfiguration for namespaces labelled
``sim.tessera.io/kubevirt-evacuation=true``. It refuses every eviction of a
``kubevirt.io=virt-launcher`` pod there with 429, and ``migrate_seconds`` after the first refusal
deletes the pod — the migration done, the source pod gone; its Deployment starts the VM's pod
again elsewhere, as the migration target would run. Other pods are allowed.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tessera.adapters.kube import ApiError, Kube, path_of

log = logging.getLogger(__name__)
NAMESPACE_LABEL = "sim.tessera.io/kubevirt-evacuation"
WEBHOOK = "sim-kubevirt-eviction"
CONFIGS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
LAUNCHER = ("kubevirt.io", "virt-launcher")


class KubevirtEvacuation:
    """The webhook server, its registration, and the timers that end each "migration"."""

    def __init__(self, kube: Kube, migrate_seconds: float = 2.0) -> None:
        self.kube = kube
        self.migrate_seconds = migrate_seconds
        self.refused: dict[str, int] = {}  # namespace/name -> evictions refused (tests read it)
        self.migrated: set[str] = set()  # pods this "migration" removed, still live until then
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []
        self._dir = tempfile.TemporaryDirectory(prefix="sim-kubevirt-")
        cert, key = _certificate(Path(self._dir.name))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._ca = base64.b64encode(cert.read_bytes()).decode()

    def start(self) -> KubevirtEvacuation:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        port = self._server.server_address[1]
        self.kube.create(CONFIGS, _registration(f"https://127.0.0.1:{port}/evict", self._ca))
        return self

    def stop(self) -> None:
        try:
            self.kube.delete(f"{CONFIGS}/{WEBHOOK}")
        except ApiError as err:
            if not err.not_found:
                raise
        for timer in self._timers:
            timer.cancel()
        self._server.shutdown()
        self._dir.cleanup()

    def review(self, request: dict[str, Any]) -> dict[str, Any]:
        """The webhook's answer to one AdmissionReview request."""
        ns, name = request.get("namespace", ""), request.get("name", "")
        pod = self.kube.get_or_none(path_of("v1", "pods", name, ns))
        labels = (pod or {}).get("metadata", {}).get("labels") or {}
        if pod is None or labels.get(LAUNCHER[0]) != LAUNCHER[1]:
            return {"uid": request["uid"], "allowed": True}
        ref = f"{ns}/{name}"
        if not request.get("dryRun"):
            with self._lock:
                first = ref not in self.refused
                self.refused[ref] = self.refused.get(ref, 0) + 1
            if first:
                timer = threading.Timer(self.migrate_seconds, self._migrated, (ns, name))
                self._timers.append(timer)
                timer.start()
        message = f"Eviction triggered evacuation of VMI {ref}"
        status = {"code": 429, "reason": "TooManyRequests", "message": message}
        return {"uid": request["uid"], "allowed": False, "status": status}

    def _migrated(self, ns: str, name: str) -> None:
        """The migration ends: the source pod goes (if nobody else deleted it meanwhile)."""
        path = path_of("v1", "pods", name, ns)
        try:
            pod = self.kube.get_or_none(path)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                return
            self.kube.delete(path)
            with self._lock:
                self.migrated.add(f"{ns}/{name}")
        except ApiError as err:
            if not err.not_found:
                log.warning("sim kubevirt: deleting migrated pod %s/%s: %s", ns, name, err)


def _handler(sim: KubevirtEvacuation) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            answer = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": sim.review(body["request"]),
            }
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return Handler


def _registration(url: str, ca: str) -> dict[str, Any]:
    rule = {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["pods/eviction"],
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK},
        "webhooks": [
            {
                "name": "virt-launcher-eviction.sim.tessera.io",
                "clientConfig": {"url": url, "caBundle": ca},
                "rules": [rule],
                "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "true"}},
                "failurePolicy": "Fail",
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }
        ],
    }


def _certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "tls.crt", folder / "tls.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key
