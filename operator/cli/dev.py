"""``tessera dev``: a local cluster to try Tessera on (``make demo`` / ``make demo-down``)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = subparsers.add_parser("dev", help="local control plane and simulated nodes")
    sub = dev.add_subparsers(dest="dev_command", metavar="ACTION", required=True)
    demo = sub.add_parser("demo", help="start (or reuse) the demo cluster and apply the samples")
    demo.add_argument("--state-dir", type=Path, default=Path(".demo"))
    demo.set_defaults(func=_demo)
    down = sub.add_parser("down", help="stop everything the demo started")
    down.add_argument("--state-dir", type=Path, default=Path(".demo"))
    down.set_defaults(func=_down)


def _demo(args: argparse.Namespace) -> int:
    from tessera.devcluster import session as dev_session

    print("==> starting the local control plane (etcd, kube-apiserver, kube-controller-manager)")
    session, fresh = dev_session.up(args.state_dir)
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
    print("==> applying config/samples")
    print(kubectl("apply", "-k", str(ROOT / "config" / "samples")), end="")
    print("==> kubectl get tessera")
    print(kubectl("get", "tessera"), end="")
    print("\nExplore with:")
    print(f"  export KUBECONFIG={session.kubeconfig}")
    print(f"  alias kubectl={session.kubectl}")
    print("  kubectl get tessera; kubectl explain npg.spec.rollout")
    print("Stop with: make demo-down")
    return 0


def _down(args: argparse.Namespace) -> int:
    from tessera.devcluster import session as dev_session

    stopped = dev_session.down(args.state_dir)
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0
