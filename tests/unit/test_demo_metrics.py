"""``make demo``'s operator serves /metrics on a free local port, and the closing lines' query
finds Tessera's reconcile counter there.

The port is recorded in the state directory, so a rerun that reuses the running operator names
the port it listens on; an operator an older demo started without metrics is replaced. The
query's metric is the product's own (``tessera.observability.metrics``), read here from a real
Prometheus endpoint on a free port.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server

from devcluster import demo
from devcluster import session as dev_session
from tessera.observability import metrics


def _session(tmp_path: Path, pids: dict[str, int]) -> dev_session.DevSession:
    session = dev_session.DevSession(tmp_path, tmp_path / "kubeconfig", tmp_path / "kubectl", pids)
    dev_session.save(session)
    return session


def test_a_new_operator_gets_a_free_port_and_a_rerun_reuses_the_recorded_one(
    tmp_path: Path,
) -> None:
    _, port = demo.metrics_port(_session(tmp_path, {}))
    assert (tmp_path / demo.METRICS_PORT_FILE).read_text() == f"{port}\n"
    assert 0 < port < 65536
    server, thread = start_http_server(port, addr="0.0.0.0", registry=CollectorRegistry())
    try:  # it was free; now it is taken, as by the demo's operator
        running = _session(tmp_path, {"operator": os.getpid()})  # a live pid: "running"
        again, same = demo.metrics_port(running)
        assert (same, again.pids) == (port, running.pids)  # reused, nothing stopped
        _, fresh = demo.metrics_port(_session(tmp_path, {}))  # operator gone: a new free port
        assert fresh != port
    finally:
        server.shutdown()
        thread.join(timeout=10)


def test_an_operator_running_without_a_recorded_port_is_stopped_for_one_serving_metrics(
    tmp_path: Path,
) -> None:
    older = subprocess.Popen(  # stands in for an older demo's operator (--metrics-port=0)
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    try:
        session, port = demo.metrics_port(_session(tmp_path, {"operator": older.pid}))
        older.wait(timeout=20)  # it would sleep 120 s: stopped (reaped by the poll, status lost)
        assert "operator" not in session.pids
        saved = dev_session.load(tmp_path)
        assert saved is not None and "operator" not in saved.pids  # forgotten in the state too
        assert (tmp_path / demo.METRICS_PORT_FILE).read_text() == f"{port}\n"
    finally:
        older.kill()
        older.wait()


def test_the_query_finds_the_products_reconcile_counter_on_a_metrics_endpoint() -> None:
    registry = CollectorRegistry()
    registry.register(metrics.RECONCILES)  # the product's counter, as `tessera run` serves it
    metrics.RECONCILES.labels(kind="DemoMetricsTest", outcome="ready").inc()
    port = demo.free_port()
    server, thread = start_http_server(port, addr="0.0.0.0", registry=registry)
    try:
        found = demo.metric_lines(demo.scrape(port))
    finally:
        server.shutdown()
        thread.join(timeout=10)
    assert 'tessera_reconciles_total{kind="DemoMetricsTest",outcome="ready"} 1.0' in found
    assert all(line.startswith(f"{demo.METRIC}{{") for line in found), found  # no HELP/TYPE
    assert demo.metrics_query(port) == (
        f"curl -s localhost:{port}/metrics | grep ^tessera_reconciles_total"
    )
