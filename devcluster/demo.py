"""The demo cluster: which simulated nodes and namespaces it has, its background processes,
and the progress table ``make demo`` prints while the pools roll out.

The scenario matches ``config/samples``: every sample selects nodes here.
Whole-GPU pools (``notebooks``, ``a10-hami``) carry ``mig.strategy=none``, as
GFD reports on GPUs without MIG; the simulator's catalog knows MIG-capable
models only, so they are A30s with MIG off; ``a10-hami``'s are labelled ``gpu=on``,
where HAMi's NVIDIA device plugin runs (``hami_nvidia``) instead of the GPU Operator's. The
DRA pool (``h100-dra``) runs the simulated NVIDIA DRA driver instead of the device plugin
(``fleet.pool(..., dra=True)``, ``dradriver``). The vGPU pool (``a100-vms``) is two vm-vgpu
nodes of eight A100 PCIe 40GB GPUs, run by the simulated vGPU Device Manager and sandbox
device plugin (``vgpunode``). ``ascend-310p-soft``'s 310P3 nodes run HAMi's Ascend plugin
(``ascend=on``) for the field report's chain (``chain``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from devcluster import (
    chain,
    dradriver,
    fleet,
    gpunode,
    hami_ascend,
    hami_nvidia,
    identity,
    npunode,
    vgpufleet,
    vgpunode,
)
from devcluster import session as dev_session
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c
from tessera.api.v1alpha1 import KINDS

TENANT_LABEL = "tessera.io/tenant"
WHOLE_GPU = {c.MIG_STRATEGY_LABEL: "none", "nvidia.com/mig.capable": "false"}
HAMI_GPU = {hami_nvidia.NODE_LABEL: hami_nvidia.NODE_VALUE}
HAMI_NPU = {c.HAMI_ASCEND_NODE_LABEL: c.HAMI_ASCEND_NODE_VALUE}
AGENT_NAMESPACES = ("gpu-operator", "tessera-system")


@dataclass(frozen=True)
class Scenario:
    """Nodes by pool, whole-GPU pools, DRA pools and tenant namespaces."""

    pools: tuple[tuple[str, str, int, int], ...]  # (pool, model, nodes, devices per node)
    whole_gpu: tuple[str, ...]
    namespaces: tuple[tuple[str, str], ...]  # (namespace, tenant)
    dra: tuple[str, ...] = ()  # pools whose nodes run the DRA driver, not the device plugin
    vgpu: tuple[str, ...] = ()  # pools of vm-vgpu nodes (model: a board of vgpu_boards.yaml)
    hami: tuple[str, ...] = ()  # pools whose nodes run HAMi's NVIDIA device plugin (gpu=on)
    hami_ascend: tuple[str, ...] = ()  # Ascend pools where HAMi's Ascend plugin runs (ascend=on)

    def nodes(self) -> list[fleet.NodeSpec]:
        specs: list[fleet.NodeSpec] = []
        for name, model, count, devices in self.pools:
            if name in self.vgpu:
                specs.extend(vgpufleet.pool(name, model, count, devices))
                continue
            pool = fleet.pool(name, model, count, devices, dra=name in self.dra)
            on = {
                **(HAMI_GPU if name in self.hami else {}),
                **(HAMI_NPU if name in self.hami_ascend else {}),
            }  # labelled at creation: no GPU Operator plugin or vNPU agent acts there first
            specs.extend(replace(spec, labels={**spec.labels, **on}) for spec in pool)
        return specs


DEMO = Scenario(
    pools=(
        ("h100-inference", "H100-80GB", 4, 8),
        ("a100-small", "A100-40GB", 2, 8),
        ("ascend-310p", "Ascend310P3", 2, 4),
        ("notebooks", "A30-24GB", 2, 4),
        ("a10-hami", "A30-24GB", 2, 4),
        ("h100-dra", "H100-80GB", 2, 4),
        ("a100-vms", "A100-PCIE-40GB", 2, 8),
        (chain.POOL, "Ascend310P3", 2, 2),
    ),
    whole_gpu=("notebooks", "a10-hami"),
    namespaces=(("team-a-dev", "team-a"), ("team-a-prod", "team-a")),
    dra=("h100-dra",),
    vgpu=("a100-vms",),
    hami=("a10-hami",),
    hami_ascend=(chain.POOL,),
)


def build(kube: Kube, scenario: Scenario = DEMO) -> list[str]:
    """Create what is missing (never resets a node that exists); returns the nodes created."""
    for ns in AGENT_NAMESPACES:
        _namespace(kube, ns, {})
    for ns, tenant in scenario.namespaces:
        _namespace(kube, ns, {TENANT_LABEL: tenant})
    existing = {n["metadata"]["name"] for n in kube.list("/api/v1/nodes")}
    fresh = [s for s in scenario.nodes() if s.name not in existing]
    vms = [s for s in fresh if s.pool in scenario.vgpu]
    created = fleet.create_nodes(kube, [s for s in fresh if s not in vms], wait=False)
    created += vgpufleet.create_nodes(kube, vms, wait=False)
    fleet.wait_schedulable(kube, created)
    for spec in fresh:
        if spec.pool in scenario.whole_gpu:
            kube.patch(path_of("v1", "nodes", spec.name), {"metadata": {"labels": WHOLE_GPU}})
    return created


def _namespace(kube: Kube, name: str, labels: dict[str, str]) -> None:
    try:
        kube.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
    except ApiError as err:
        if not err.conflict:
            raise


# -- the simulated node agents, as one process --------------------------------------------------


def run_agents(kube: Kube, workdir: Path, stop: threading.Event) -> list[str]:
    """Run every simulated agent until ``stop`` is set; returns the agents' names."""
    sims: list[Any] = [
        gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.3).start(),
        hami_ascend.HamiAscendPlugin(kube).start(),
        hami_nvidia.HamiNvidiaPlugin(kube).start(),
        npunode.AscendNodes(kube, workdir).start(),
        dradriver.DraDriver(kube).start(),
        vgpunode.VgpuNodeAgents(kube, reconfigure_seconds=0.3).start(),
    ]
    names = [
        "gpu-agents (MIG manager, device-plugin config manager, GFD)",
        "HAMi Ascend device plugin (nodes labelled ascend=on)",
        "HAMi NVIDIA device plugin (nodes labelled gpu=on)",
        "vnpu agents (one per Ascend node, fake npu-smi)",
        f"NVIDIA DRA driver's kubelet plugin (nodes labelled {fleet.DRA_NODE_LABEL}=true)",
        "vGPU Device Manager and sandbox device plugin (vm-vgpu nodes)",
    ]
    try:
        stop.wait()
    finally:
        for sim in sims:
            sim.stop()
    return names


# -- Tessera's identities ------------------------------------------------------------------------
# The operator and the vNPU agents run as their ServiceAccounts of config/rbac, never as admin;
# the simulated device plugins and MIG manager (not Tessera's) keep the admin's.


def operator_kubeconfig(kube: Kube, state_dir: Path) -> Path:
    """A kubeconfig holding a token of the operator's ServiceAccount (config/rbac)."""
    bearer = identity.token(kube, identity.OPERATOR)
    path = state_dir / "operator.kubeconfig"
    return identity.kubeconfig(kube, bearer, identity.OPERATOR.name, path)


def component_logs(state_dir: Path) -> list[Path]:
    """The logs of Tessera's own processes: the operator's and each vNPU agent's."""
    return [state_dir / "operator.log", *sorted(state_dir.glob("agents/*/agent.log"))]


def log_marks(state_dir: Path) -> dict[Path, int]:
    """How far each of those logs is written now (a rerun appends to them)."""
    return {p: p.stat().st_size for p in component_logs(state_dir) if p.exists()}


def refusals(state_dir: Path, marks: Mapping[Path, int]) -> list[str]:
    """Lines written since ``marks`` that show a refused call, a rejected token or a crash."""
    found = []
    for path in component_logs(state_dir):
        if not path.exists():
            continue
        with path.open("rb") as log:
            log.seek(marks.get(path, 0))
            text = log.read().decode(errors="replace")
        found += [f"{path}: {line}" for line in text.splitlines() if identity.PROBLEM.search(line)]
    return found


# -- background processes ------------------------------------------------------------------------


def prune(state_dir: Path, names: Sequence[str]) -> None:
    """Forget background processes that died, so the control plane is still reused."""
    session = dev_session.load(state_dir)
    if session is None:
        return
    pids = {n: p for n, p in session.pids.items() if n not in names or dev_session.pid_running(p)}
    if pids != session.pids:
        dev_session.save(
            dev_session.DevSession(state_dir, session.kubeconfig, session.kubectl, pids)
        )


def spawn(
    session: dev_session.DevSession, name: str, argv: Sequence[str]
) -> dev_session.DevSession:
    """Start ``tessera ARGV`` in its own process group, logging to STATE_DIR/NAME.log."""
    if name in session.pids and dev_session.pid_running(session.pids[name]):
        return session
    log = (session.state_dir / f"{name}.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tessera.cli.main", *argv],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    return dev_session.add_process(session, name, proc.pid)


def stop(session: dev_session.DevSession, name: str) -> dev_session.DevSession:
    """Stop the background process ``name`` (its process group) and forget it."""
    pid = session.pids.get(name)
    if pid is None:
        return session
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while dev_session.pid_running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # waiting for the process to exit, bounded by the deadline
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    pids = {n: p for n, p in session.pids.items() if n != name}
    kept = dev_session.DevSession(session.state_dir, session.kubeconfig, session.kubectl, pids)
    dev_session.save(kept)
    return kept


def stop_on_signal(stop: threading.Event) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())


# -- progress ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    kind: str
    name: str
    ready: str
    reason: str
    progress: str


def rows(kube: Kube) -> list[Row]:
    out = []
    for info in KINDS:
        for obj in kube.list(f"/apis/{c.GROUP}/{c.VERSION}/{info.plural}"):
            status = obj.get("status") or {}
            cond: dict[str, Any] = next(
                (x for x in status.get("conditions") or [] if x.get("type") == "Ready"), {}
            )
            fresh = status.get("observedGeneration") == obj["metadata"].get("generation")
            ready = cond.get("status", "-") if fresh else "-"
            out.append(
                Row(
                    info.kind,
                    obj["metadata"]["name"],
                    ready,
                    cond.get("reason", ""),
                    _progress(status),
                )
            )
    return out


def _progress(status: dict[str, Any]) -> str:
    nodes = status.get("nodes") or {}
    if "updated" in nodes:
        return f"{nodes['updated']}/{nodes.get('total', 0)} nodes"
    if "applied" in nodes:
        return f"{nodes['applied']}/{nodes.get('matched', 0)} nodes"
    if "namespaces" in status:
        return f"{status['namespaces']} namespaces"
    return ""


def table(found: Sequence[Row]) -> str:
    header = Row("KIND", "NAME", "READY", "REASON", "PROGRESS")
    lines = [header, *found]
    widths = [max(len(getattr(r, f)) for r in lines) for f in ("kind", "name", "ready", "reason")]
    return "\n".join(
        f"{r.kind:<{widths[0]}}  {r.name:<{widths[1]}}  {r.ready:<{widths[2]}}  "
        f"{r.reason:<{widths[3]}}  {r.progress}"
        for r in lines
    )


def settled(found: Sequence[Row]) -> bool:
    """Every object Ready."""
    return bool(found) and all(r.ready == "True" for r in found)


# -- the operator's metrics ----------------------------------------------------------------------
# The demo's operator serves /metrics on a free local port (docs/observability.md), recorded in
# the state directory so a rerun that reuses the running operator names the same port.

METRICS_PORT_FILE = "operator.metrics-port"
METRIC = "tessera_reconciles_total"  # reconcile passes by kind and outcome: there once any ran


def metrics_port(session: dev_session.DevSession) -> tuple[dev_session.DevSession, int]:
    """The port for the operator's ``--metrics-port``: the running operator's, recorded when it
    started; else a free one, recorded now. An operator running without one recorded (started
    by an older demo, with metrics off) is stopped, so that ``spawn`` starts one serving them."""
    path = session.state_dir / METRICS_PORT_FILE
    pid = session.pids.get("operator")
    if pid is not None and dev_session.pid_running(pid):
        if path.exists():
            return session, int(path.read_text())
        session = stop(session, "operator")
    port = free_port()
    path.write_text(f"{port}\n")
    return session, port


def free_port() -> int:
    """A TCP port nothing listens on now, on any interface (``tessera run`` binds 0.0.0.0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def scrape(port: int, timeout: float = 10.0) -> str:
    """The operator's /metrics page, as Prometheus reads it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as page:
        return str(page.read().decode())


def metric_lines(text: str, name: str = METRIC) -> list[str]:
    """The samples of metric ``name`` in an exposition page: what ``grep ^NAME`` prints."""
    return [line for line in text.splitlines() if line.startswith(name)]


def metrics_query(port: int, name: str = METRIC) -> str:
    """The one-line query the demo prints for a shell."""
    return f"curl -s localhost:{port}/metrics | grep ^{name}"
