"""What every cluster benchmark needs: a control plane, nodes, the operator, and honest meters.

The control plane runs real scheduling (:mod:`devcluster.scheduling`): kube-controller-manager
with all its controllers, kube-scheduler and KWOK. Nodes are KWOK's (annotation
``kwok.x-k8s.io/node: fake``: KWOK makes them Ready and renews their Leases) with the labels
and allocatable of simulated GPU nodes; workload pods come from Deployments without
``nodeName``, placed by kube-scheduler and run by KWOK (:mod:`bench._workloads`).
``TESSERA_BENCH_SCALE`` scales the node and pod counts of ``bench.scale``: 1 is the targets'
10,000 nodes and 50,000 pods; the default, 0.2, takes ~26 min on 2 shared CPUs (1: hours).

Figures come from outside the operator: writes are counted from the API
server's watch streams (each write of an object is one watch event), CPU
seconds and resident memory from ``/proc/<pid>``. The operator runs as a real
``tessera run`` process with its defaults (resync 60 s, INFO logging), under a token of its
ServiceAccount with exactly the RBAC of config/rbac, as in a cluster (never as admin).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcluster import fleet, identity, watchdog
from devcluster.controlplane import ControlPlane, find_binaries
from devcluster.scheduling import Scheduling, find_kwok
from tessera.adapters.kube import ApiError, Kube, path_of

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SCALE = float(os.environ.get("TESSERA_BENCH_SCALE", "0.2"))
# 10,000 KWOK nodes renewing a 40 s Lease every 10 s would write 1,000 times a second: the
# Leases last 20 min here (one renewal per node per 5 min), node status heartbeats come every
# 2 h (Leases make them unnecessary), and kube-controller-manager waits as long before it
# calls a node NotReady. Its and kube-scheduler's clients are not throttled (kwokctl's
# --disable-qps-limits does the same), or 50,000 pods would take ~40 min to create.
LEASE_SECONDS = 1200


def scaled(count: int) -> int:
    return max(1, round(count * SCALE))


def scheduling() -> Scheduling:
    return Scheduling(
        find_kwok(),
        lease_seconds=LEASE_SECONDS,
        node_heartbeat_ms=2 * 3600 * 1000,
        node_monitor_grace_seconds=LEASE_SECONDS,
        api_qps=5000,
    )


@contextlib.contextmanager
def control_plane() -> Iterator[tuple[ControlPlane, Kube]]:
    """A fresh control plane with Tessera's CRDs; everything stops on the way out."""
    plane = ControlPlane(find_binaries(), scheduling=scheduling()).start()
    kube = Kube.from_kubeconfig(str(plane.kubeconfig))
    try:
        kubectl = [str(plane.kubectl), f"--kubeconfig={plane.kubeconfig}"]
        subprocess.run([*kubectl, "apply", "--server-side", "-k", str(ROOT / "crds")], check=True, capture_output=True)  # fmt: skip
        subprocess.run([*kubectl, "wait", "--for=condition=Established", "crd", "--all"], check=True, capture_output=True)  # fmt: skip
        for ns in ("gpu-operator", "kube-system", identity.OPERATOR.namespace):
            with contextlib.suppress(ApiError):
                kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        subprocess.run([*kubectl, "apply", "-f", str(ROOT / "config/agent/namespace.yaml")], check=True, capture_output=True)  # fmt: skip
        subprocess.run([*kubectl, "apply", "-k", str(ROOT / "config/rbac")], check=True, capture_output=True)  # fmt: skip
        # Every wait fails at once, naming the component and its log tail, when one has died.
        with watchdog.watching(plane.check_alive):
            yield plane, kube
    finally:
        kube.close()
        plane.stop()


def parallel(kube: Kube, work: Callable[[Kube, Any], object], items: Iterable[Any]) -> None:
    """Run ``work`` over ``items`` on 16 threads (setup only: never what is measured); an
    item the API server was too busy for is tried again, a create that landed meanwhile
    (409) counts as done."""

    def one(item: Any) -> None:
        for attempt in range(30):
            try:
                work(kube, item)
                return
            except ApiError as err:
                if attempt and err.conflict:
                    return
                if not busy(err) or attempt == 29:
                    raise
                time.sleep(1)

    with ThreadPoolExecutor(16) as pool:
        for _ in pool.map(one, items):
            pass


def create_nodes(kube: Kube, specs: list[fleet.NodeSpec], timeout: float = 900) -> float:
    """KWOK nodes with the labels and devices of ``specs``; the seconds until all are Ready
    and free of the ``not-ready`` taint (the scheduler can place pods there)."""
    start = time.monotonic()
    parallel(kube, _kwok_node, specs)
    names = {s.name for s in specs}

    def all_ready() -> bool:
        ready = {
            n["metadata"]["name"]
            for page in kube.pages("/api/v1/nodes")
            for n in page.get("items", [])
            if fleet.schedulable(n)
        }
        return names <= ready

    wait_until(all_ready, timeout, f"{len(specs):,} KWOK nodes Ready, untainted", interval=5.0)
    return time.monotonic() - start


def _kwok_node(kube: Kube, spec: fleet.NodeSpec) -> None:
    """A KWOK node dressed as a device plugin and GFD would have (``fleet``); the wait for all
    of them is :func:`create_nodes`'s (one list per poll, not one GET per node)."""
    fleet.create_nodes(kube, [spec], wait=False)


@dataclass
class Operator:
    """``tessera run`` as a child process, with its CPU time and memory read from /proc."""

    plane: ControlPlane
    log: Path = field(default_factory=lambda: Path(tempfile.mkdtemp()) / "operator.log")
    proc: subprocess.Popen[bytes] | None = None
    profiler: subprocess.Popen[bytes] | None = None

    def start(self, *extra: str) -> Operator:
        admin = Kube.from_kubeconfig(str(self.plane.kubeconfig))
        try:  # the ServiceAccount's token, as the kubelet would mount it
            bearer = identity.token(admin, identity.OPERATOR)
            path = self.log.parent / "operator.kubeconfig"
            config = identity.kubeconfig(admin, bearer, identity.OPERATOR.name, path)
        finally:
            admin.close()
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tessera.cli.main", "run",
                 f"--kubeconfig={config}", "--metrics-port=0", *extra],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        profile = os.environ.get("TESSERA_BENCH_PYSPY")  # a folder: record the operator there
        if profile:
            self.profiler = subprocess.Popen(
                ["py-spy", "record", "--format", "raw", "--idle", "--threads", "-r", "100",
                 "-p", str(self.pid), "-o", str(Path(profile) / f"operator-{self.pid}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        return self

    def stop(self) -> None:
        if self.profiler is not None:
            self.profiler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            self.profiler.wait(timeout=60)
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime

    def memory_mib(self) -> tuple[float, float]:
        """(resident now, resident peak) in MiB."""
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{self.pid}/status").read_text().splitlines()
        )
        kib = [int(status[k].split()[0]) for k in ("VmRSS", "VmHWM")]
        return kib[0] / 1024, kib[1] / 1024

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def problems(self) -> int:
        """Lines of its log showing a traceback, or a call RBAC refused or a rejected token."""
        return sum(1 for line in self.text().splitlines() if identity.PROBLEM.search(line))


class WriteMeter:
    """Counts writes as the API server reports them: one watch event per created, changed
    or deleted object, per resource and per object name."""

    def __init__(self, kube: Kube, paths: Iterable[str]) -> None:
        self.kube = kube
        self.by_object: Counter[tuple[str, str]] = Counter()
        self.by_writer: Counter[tuple[str, str]] = Counter()  # (path, field manager)
        self.seen: list[tuple[float, str, dict[str, Any]]] = []
        self.stopped = threading.Event()
        # (path, ADDED/MODIFIED/DELETED, object): what the benches' outside observers watch
        self.on_event: Callable[[str, str, dict[str, Any]], None] = lambda path, kind, obj: None
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._watch, args=(p,), daemon=True) for p in paths
        ]
        self._ready = threading.Barrier(len(self._threads) + 1)

    def __enter__(self) -> WriteMeter:
        for thread in self._threads:
            thread.start()
        self._ready.wait(60)
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()

    def reset(self) -> None:
        with self._lock:
            self.by_object.clear()
            self.by_writer.clear()

    @property
    def total(self) -> int:
        return sum(self.by_object.values())

    def per_resource(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (path, _), count in self.by_object.items():
            out[path] += count
        return dict(out)

    def _now(self, path: str) -> str:
        """The current resourceVersion of ``path``, from a one-item page (50,000 pods are not
        listed to start a watch)."""
        for _ in range(60):
            try:
                page = next(self.kube.pages(path, page_size=1))
                return str(page["metadata"]["resourceVersion"])
            except ApiError as err:
                if not busy(err):
                    raise
                time.sleep(1)
        raise TimeoutError(f"no resourceVersion of {path} in 60 tries")

    def _watch(self, path: str) -> None:
        version = self._now(path)
        self._ready.wait(60)
        while not self.stopped.is_set():
            try:
                for kind, obj in self.kube.watch(
                    path, resource_version=version, timeout_seconds=30
                ):
                    if kind == "ERROR":  # expired: start again from now
                        version = self._now(path)
                        break
                    if kind == "BOOKMARK":
                        version = obj["metadata"]["resourceVersion"]
                        continue
                    version = obj["metadata"]["resourceVersion"]
                    with self._lock:
                        self.by_object[(path, obj["metadata"]["name"])] += 1
                        self.by_writer[(path, writer(obj))] += 1
                    self.on_event(path, kind, obj)
            except ApiError:
                if self.stopped.is_set():
                    return  # the control plane is going away
                with contextlib.suppress(ApiError):
                    version = self._now(path)


def busy(err: ApiError) -> bool:
    return err.status in (0, 429) or err.status >= 500


def writer(obj: dict[str, Any]) -> str:
    """Who wrote this version: the field manager of the newest managedFields entry (ties: the
    last listed), to say who made writes that should not be there."""
    entries = obj["metadata"].get("managedFields") or []
    if not entries:
        return "?"
    newest = max(range(len(entries)), key=lambda i: (entries[i].get("time") or "", i))
    return str(entries[newest].get("manager", "?"))


def wait_until(
    probe: Callable[[], bool], timeout: float, what: str, interval: float = 0.05
) -> float:
    """Poll ``probe``; return the seconds it took, or fail naming ``what``. An API server too
    busy to answer (50,000 pods arriving: 429, 5xx such as a list ahead of its watch cache)
    is a poll that found nothing yet."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        watchdog.check()
        try:
            if probe():
                return time.monotonic() - start
        except ApiError as err:
            if not busy(err):
                raise
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached in {timeout:.0f} s")


def node_path(name: str) -> str:
    return path_of("v1", "nodes", name)


@dataclass(frozen=True)
class Row:
    measure: str
    value: str
    reference: str
    ratio: str
    target: str
    met: bool | None


def table(rows: list[Row]) -> str:
    head = ("measure", "value", "ideal / floor", "ratio", "target", "")
    cells = [head] + [
        (r.measure, r.value, r.reference, r.ratio, r.target,
         "" if r.met is None else ("met" if r.met else "MISSED"))
        for r in rows
    ]  # fmt: skip
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(head))).rstrip() for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
