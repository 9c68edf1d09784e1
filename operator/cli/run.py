"""``tessera run``: the operator process.

Builds the wiring once — API adapter, settings, clock — and hands kopf a
registry whose handlers close over it. Two replicas coordinate through kopf
peering (``--peering``): the one with the higher ``--priority`` acts, the
other waits, so two operators never drain the same pool at once.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = subparsers.add_parser("run", help="run the operator")
    run.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    run.add_argument("--peering", default="", help="ClusterKopfPeering name (empty: standalone)")
    run.add_argument(
        "--priority", type=int, default=0, help="peering priority (distinct per replica)"
    )
    run.add_argument("--metrics-port", type=int, default=8000, help="0 disables /metrics")
    run.add_argument(
        "--health-port", type=int, default=0, help="liveness on :PORT/healthz; 0 = off"
    )
    run.add_argument("--resync-seconds", type=float, default=60.0)
    run.add_argument("--log-level", default="INFO")
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import kopf
    from prometheus_client import start_http_server

    from tessera.adapters.kube import Kube
    from tessera.controllers.runtime import Context, Settings
    from tessera.handlers.wiring import build_registry
    from tessera.observability import tracing

    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    tracing.configure()
    if args.metrics_port:
        start_http_server(args.metrics_port, addr="0.0.0.0")
    kube = Kube.from_kubeconfig(args.kubeconfig)
    ctx = Context(kube, Settings(resync_seconds=args.resync_seconds))
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig  # kopf's own login reads it
    registry = build_registry(ctx)
    asyncio.run(
        kopf.operator(
            registry=registry,
            clusterwide=True,
            standalone=not args.peering,
            peering_name=args.peering or None,
            priority=args.priority,
            liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz"
            if args.health_port
            else None,
        )
    )
    return 0
