"""``tessera run``: the operator process.

Builds the wiring once — API adapter, settings, clock — and hands kopf a
registry whose handlers close over it. Two replicas coordinate through kopf
peering (``--peering``): the one with the higher ``--priority`` acts, the
other waits, so two operators never drain the same pool at once. Under
peering every pass also holds a writer Lease (``tessera.domain.base.lease``), so a
handover waits for the last pass of the replica handing over.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
from typing import TYPE_CHECKING

from tessera.cli import configmaps

if TYPE_CHECKING:  # imported lazily below: `tessera --version` must not load the client
    # nor kopf (seconds to load; test_cli_startup)
    import kopf

    from tessera.controllers.runtime import Settings


OPERATOR_NAMESPACE = "tessera-system"  # where config/ and the Helm chart install the operator
WRITER_LEASE = "tessera-writer"  # fixed: the RBAC Role names it (config/rbac/lease_role.yaml)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = subparsers.add_parser("run", help="run the operator")
    run.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    run.add_argument("--peering", default="", help="ClusterKopfPeering name (empty: standalone)")
    run.add_argument(
        "--priority", type=int, default=0, help="peering priority (distinct per replica)"
    )
    run.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE", OPERATOR_NAMESPACE),
        help="namespace of the writer Lease held under --peering (default: %(default)s)",
    )
    run.add_argument(
        "--identity",
        default=os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
        help="this replica's name in the writer Lease (default: $POD_NAME, else host-pid)",
    )
    run.add_argument("--metrics-port", type=int, default=8000, help="0 disables /metrics")
    run.add_argument(
        "--health-port", type=int, default=0, help="liveness on :PORT/healthz; 0 = off"
    )
    run.add_argument("--resync-seconds", type=float, default=60.0)
    run.add_argument(
        "--retry-cap-seconds",
        type=float,
        default=60.0,
        help="a failing object is retried after 1 s, doubling per failure up to this",
    )
    run.add_argument("--log-level", default="INFO")
    run.add_argument(
        "--log-format",
        choices=("logfmt", "text"),
        default="logfmt",
        help="logfmt: one key=value line per record (object, action, reason keys); text: prose",
    )
    configmaps.add_flags(
        run, "ConfigMaps Tessera writes (keep them in step with the RBAC resourceNames)"
    )
    run.set_defaults(func=_run)


def settings_from(args: argparse.Namespace) -> Settings:
    """The controllers' settings from the parsed flags."""
    from tessera.controllers.runtime import Settings

    return Settings(
        resync_seconds=args.resync_seconds,
        retry_cap_seconds=args.retry_cap_seconds,
        mig_configmap=args.mig_parted_configmap,
        device_plugin_configmap=args.device_plugin_configmap,
        vnpu_configmap=args.vnpu_configmap,
        vgpu_configmap=args.vgpu_configmap,
        hami_namespace=args.hami_namespace,
    )


def _run(args: argparse.Namespace) -> int:
    from prometheus_client import start_http_server

    from tessera.adapters.kube import Kube
    from tessera.adapters.node_watch import NodeWatch
    from tessera.controllers.runtime import Context, pod_index, utcnow
    from tessera.controllers.skipping import NodeChanges
    from tessera.controllers.writer_lease import WriterLease
    from tessera.domain.base.idle import node_fingerprint, slim_node
    from tessera.handlers.wiring import build_registry
    from tessera.observability import logs, metrics, tracing

    logs.configure(args.log_level, args.log_format)
    tracing.configure()
    if args.metrics_port:
        start_http_server(args.metrics_port, addr="0.0.0.0")
    kube = Kube.from_kubeconfig(args.kubeconfig, on_write=metrics.count_write)
    pods = pod_index(kube).start()
    nodes = NodeWatch(kube, node_fingerprint, keep=slim_node)  # started by the wake-ups
    assert nodes.cache is not None
    kube.watch_writes(nodes.cache)  # a pass reads the cache only once its own writes are in
    ctx = Context(
        kube, settings_from(args), pod_index=pods, node_watch=nodes, node_changes=NodeChanges()
    )
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig  # kopf's own login reads it
    lease = None
    if args.peering:
        lease = WriterLease(kube, args.lease_namespace, WRITER_LEASE, args.identity, utcnow)
        lease.on_taken = nodes.cache.distrust  # a peer's last writes: list before trusting
    registry = build_registry(ctx, lease=lease)
    try:
        _operate(args, registry)
    finally:
        pods.stop()
        nodes.stop()
    return 0


def _operate(args: argparse.Namespace, registry: kopf.OperatorRegistry) -> None:
    import kopf

    async def operate() -> None:
        await kopf.operator(
            registry=registry,
            clusterwide=True,
            standalone=not args.peering,
            peering_name=args.peering or None,
            priority=args.priority,
            liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz"
            if args.health_port
            else None,
        )
        asyncio.get_running_loop().set_exception_handler(_after_stop)

    asyncio.run(operate())


def _after_stop(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """Once kopf has stopped, a watch stream it left open may fail to close as the loop
    shuts down ("generator didn't stop after athrow()"): nothing is lost, so say it quietly."""
    if "asyncgen" in context:
        logging.getLogger("tessera.run").debug("at exit: %s", context.get("message"))
        return
    loop.default_exception_handler(context)
