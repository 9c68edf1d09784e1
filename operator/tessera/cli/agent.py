"""``tessera agent``: node agents Tessera ships, run as DaemonSets."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agent = subparsers.add_parser("agent", help="node agents (run on the nodes)")
    sub = agent.add_subparsers(dest="agent_command", metavar="AGENT", required=True)
    vnpu = sub.add_parser(
        "vnpu", help="Ascend vNPU agent: applies tessera.io/vnpu.config with npu-smi"
    )
    vnpu.add_argument(
        "--node", default=os.environ.get("NODE_NAME"), help="this node (default $NODE_NAME)"
    )
    vnpu.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    vnpu.add_argument("--npu-smi", default="npu-smi", help="path of npu-smi")
    vnpu.add_argument("--configmap", default="", help="NAMESPACE/NAME of the vNPU configs")
    vnpu.set_defaults(func=_vnpu)


def _vnpu(args: argparse.Namespace) -> int:
    # Imported here: every `tessera` command builds this parser, and only this one needs the
    # Kubernetes client (a second to load; test_cli_startup).
    from tessera.adapters.informer import Informer
    from tessera.adapters.kube import Kube
    from tessera.agent.vnpu import VnpuAgent

    if not args.node:
        raise SystemExit("tessera agent vnpu: --node or $NODE_NAME is required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    kube = Kube.from_kubeconfig(args.kubeconfig)
    extra = {}
    if args.configmap:
        ns, _, name = args.configmap.partition("/")
        extra["configmap"] = (ns, name)
    agent = VnpuAgent(kube, args.node, npu_smi=args.npu_smi, **extra)
    informer = Informer(
        kube,
        "/api/v1/nodes",
        agent.on_node,
        name="vnpu-agent",
        field_selector=f"metadata.name={args.node}",
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    informer.start()
    stop.wait()
    informer.stop()
    return 0
