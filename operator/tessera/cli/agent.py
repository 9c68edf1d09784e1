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
    gpus = sub.add_parser(
        "gpus", help="GPU agent: publishes which pods hold which GPU (tessera.io/gpu-holders)"
    )
    gpus.add_argument(
        "--node", default=os.environ.get("NODE_NAME"), help="this node (default $NODE_NAME)"
    )
    gpus.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    gpus.add_argument(
        "--pod-resources-socket",
        default="/var/lib/kubelet/pod-resources/kubelet.sock",
        help="the kubelet's PodResources API socket (default: %(default)s)",
    )
    gpus.add_argument("--nvidia-smi", default="nvidia-smi", help="path of nvidia-smi")
    gpus.add_argument(
        "--interval", type=float, default=10.0, help="seconds between looks (default: 10)"
    )
    gpus.set_defaults(func=_gpus)


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


def _gpus(args: argparse.Namespace) -> int:
    from tessera.adapters.kube import Kube
    from tessera.agent.gpus import GpuAgent

    if not args.node:
        raise SystemExit("tessera agent gpus: --node or $NODE_NAME is required")
    if args.interval <= 0:
        raise SystemExit("tessera agent gpus: --interval must be positive")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    kube = Kube.from_kubeconfig(args.kubeconfig)
    agent = GpuAgent(kube, args.node, socket=args.pod_resources_socket, nvidia_smi=args.nvidia_smi)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    agent.run(args.interval, stop)
    return 0
