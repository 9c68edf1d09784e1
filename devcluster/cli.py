"""``tessera dev``: a local cluster to try Tessera on (``make demo`` / ``make demo-down``).

Registered by this distribution as the ``tessera.cli`` entry point ``dev``, which the
operator's CLI loads when it is installed (a checkout after ``make dev``); the operator's
wheel has neither this module nor any import of it.

``demo`` starts (or reuses) the control plane, creates the simulated nodes of
``devcluster.demo``, installs ``config/rbac``, starts the simulated agents
(``tessera dev agents``; the vNPU agents among them run as the ``tessera-agent``
ServiceAccount) and the operator (``tessera run``, as the ``tessera`` ServiceAccount)
in the background — both recorded in the session, so ``down`` stops them — applies
``config/samples`` and shows the pools rolling out until everything is Ready or a
deadline, then creates the serving workloads (``devcluster/serving.yaml``, namespace
``ml``) and waits until kube-scheduler has placed every replica and KWOK runs it. The
operator serves its metrics on a free local port, which the closing lines name with a query.
A call refused to the operator or an agent fails it, and so does a /metrics that does not
answer with Tessera's reconcile counter.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tessera.adapters.kube import Kube

ROOT = Path(__file__).resolve().parents[1]  # the checkout: crds/, config/
BACKGROUND = ("agents", "operator")
SERVING_TIMEOUT = 60.0  # seconds for the serving workloads to run once the pools are Ready
CHAIN_TIMEOUT = 120.0  # seconds for the field report's chain (soft slicing rolled out, configs)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = subparsers.add_parser("dev", help="local control plane and simulated nodes")
    sub = dev.add_subparsers(dest="dev_command", metavar="ACTION", required=True)
    demo = sub.add_parser("demo", help="start (or reuse) the demo cluster and apply the samples")
    demo.add_argument("--state-dir", type=Path, default=Path(".demo"))
    demo.add_argument(
        "--timeout", type=float, default=150.0, help="seconds to wait for everything to be Ready"
    )
    demo.set_defaults(func=_demo)
    down = sub.add_parser("down", help="stop everything the demo started")
    down.add_argument("--state-dir", type=Path, default=Path(".demo"))
    down.set_defaults(func=_down)
    agents = sub.add_parser(
        "agents", help="run the simulated device agents (foreground, until SIGTERM)"
    )
    agents.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    agents.add_argument("--workdir", type=Path, default=Path(".demo") / "agents")
    agents.set_defaults(func=_agents)


def _demo(args: argparse.Namespace) -> int:
    from devcluster import demo
    from devcluster import session as dev_session
    from tessera.adapters.kube import Kube

    started = time.monotonic()
    state = args.state_dir.resolve()
    print(
        "==> starting the local cluster (etcd, kube-apiserver, kube-controller-manager,"
        " kube-scheduler, KWOK)"
    )
    demo.prune(state, BACKGROUND)
    session, fresh = dev_session.up(state)
    print("    started" if fresh else "    already running; reusing it")

    def kubectl(*argv: str) -> str:
        out = subprocess.run(
            [str(session.kubectl), f"--kubeconfig={session.kubeconfig}", *argv],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            sys.stderr.write(out.stderr)
            raise SystemExit(1)
        return out.stdout

    print("==> installing Tessera's CRDs")
    kubectl("apply", "--server-side", "-f", str(ROOT / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    kube = Kube.from_kubeconfig(str(session.kubeconfig))
    created = demo.build(kube)
    pools = ", ".join(f"{n}x {m} ({p})" for p, m, n, _ in demo.DEMO.pools)
    print(f"==> simulated nodes: {pools}; {len(created)} created now")
    print("==> installing config/rbac: the operator and the vNPU agents run as its ServiceAccounts")
    kubectl("apply", "-f", str(ROOT / "config" / "agent" / "namespace.yaml"))
    kubectl("apply", "-k", str(ROOT / "config" / "rbac"))
    marks = demo.log_marks(state)
    config = f"--kubeconfig={session.kubeconfig}"  # the simulators' (device plugins): admin
    session = demo.spawn(
        session, "agents", ["dev", "agents", config, f"--workdir={state / 'agents'}"]
    )
    operator = f"--kubeconfig={demo.operator_kubeconfig(kube, state)}"
    session, port = demo.metrics_port(session)
    session = demo.spawn(
        session, "operator", ["run", operator, f"--metrics-port={port}", "--resync-seconds=10"]
    )
    print(
        f"==> agents and operator running (logs: {state}/agents.log, {state}/operator.log,"
        f" vNPU agents {state}/agents/NODE/agent.log)"
    )
    print("==> applying config/samples")
    print(kubectl("apply", "-k", str(ROOT / "config" / "samples")), end="")
    ready = _watch(kube, args.timeout) and _serve(kube)
    ready = _chain(kube, [str(session.kubectl), f"--kubeconfig={session.kubeconfig}"]) and ready
    kube.close()
    ready = _metrics(port) and ready
    refused = demo.refusals(state, marks)
    for line in refused[:10]:
        print(f"    refused: {line}")
    print(f"==> kubectl get tessera ({time.monotonic() - started:.0f}s)")
    print(kubectl("get", "tessera"), end="")
    print("\nExplore with:")
    print(explore_hint(session.kubeconfig, session.kubectl))
    print(f"Metrics: {demo.metrics_query(port)}   # docs/observability.md lists them")
    print("Stop with: make demo-down")
    return 0 if ready and not refused else 1


def _serve(kube: Kube) -> bool:
    """Create the serving workloads (once the pools are Ready) and wait until they run."""
    from devcluster import workloads

    created = workloads.apply(kube)
    print(f"==> serving workloads in ml ({workloads.MANIFEST.name}): {len(created)} created now")
    found = workloads.wait_running(kube, SERVING_TIMEOUT)
    shown = found or workloads.pods(kube)
    print("\n".join(f"    {line}" for line in workloads.placement(shown, kube).splitlines()))
    if not found:
        print(f"    not every replica runs after {SERVING_TIMEOUT:.0f}s: kubectl get pods -n ml")
    return bool(found)


def _metrics(port: int) -> bool:
    """What the operator's /metrics says of its reconcile passes (the closing lines' query)."""
    from devcluster import demo

    print(f"==> the operator's metrics on localhost:{port}/metrics: {demo.METRIC}")
    try:
        found = demo.metric_lines(demo.scrape(port))
    except OSError as err:
        print(f"    no answer from localhost:{port}/metrics ({err}); see the operator log")
        return False
    print("\n".join(f"    {line}" for line in found) or f"    no {demo.METRIC} yet")
    return bool(found)


def _chain(kube: Kube, kubectl: list[str]) -> bool:
    """The field report's chain on ascend-310p-soft: HAMi's and Volcano's configs, the pods."""
    import yaml

    from devcluster import chain

    print(f"==> the field report's chain on {chain.POOL} ({chain.MANIFEST.name}): HAMi, Volcano")
    chain.install(kube)
    policy = yaml.safe_dump(chain.manifests()[0])
    subprocess.run([*kubectl, "apply", "-f", "-"], input=policy, text=True, check=True)
    text, ok = chain.report(chain.wait(kube, kubectl, CHAIN_TIMEOUT))
    print(text)
    return ok


def explore_hint(kubeconfig: Path, kubectl: Path) -> str:
    """Commands to paste into any shell: absolute paths, as neither kubectl nor tessera may be
    on PATH (tessera lives in the venv that ran this command)."""
    tessera = Path(sys.executable).with_name("tessera")
    return "\n".join(
        [
            f"  export KUBECONFIG={kubeconfig} TESSERA_KUBECTL={kubectl}  # plan renders kustomize",
            f"  alias kubectl={kubectl} tessera={tessera}  # or: source {tessera.parent}/activate",
            "  kubectl get tessera; kubectl get npg h100-inference -o yaml",
            f"  tessera plan -f {ROOT / 'config' / 'samples'}/   # preview a change before applying it",
        ]
    )


def _watch(kube: object, timeout: float) -> bool:
    """Redraw the progress table every second until every object is Ready or the deadline."""
    from devcluster import demo

    deadline = time.monotonic() + timeout
    tty = sys.stdout.isatty()
    shown, last = 0, ""
    while True:
        rows = demo.rows(kube)  # type: ignore[arg-type]
        text = demo.table(rows)
        if tty and shown:
            sys.stdout.write(f"\x1b[{shown}F\x1b[J")
        if tty or text != last:
            print(text, flush=True)
            shown, last = text.count("\n") + 1, text
        done = demo.settled(rows)
        if done or time.monotonic() > deadline:
            if not done:
                print(f"    not everything is Ready after {timeout:.0f}s; see the operator log")
            return done
        time.sleep(1.0)  # the refresh interval of the live table


def _agents(args: argparse.Namespace) -> int:
    from devcluster import demo
    from tessera.adapters.kube import Kube

    kube = Kube.from_kubeconfig(args.kubeconfig)
    args.workdir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    demo.stop_on_signal(stop)
    print("simulated agents running; SIGTERM stops them", flush=True)
    demo.run_agents(kube, args.workdir, stop)
    kube.close()
    return 0


def _down(args: argparse.Namespace) -> int:
    from devcluster import session as dev_session

    stopped = dev_session.down(args.state_dir.resolve())
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0
