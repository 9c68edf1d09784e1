"""Metrics catalog vs the table in docs/observability.md; spans per reconcile and per action; logfmt lines."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from tessera.adapters.kube import WriteCounter
from tessera.observability import logs, metrics, tracing

METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def readme_metrics() -> dict[str, tuple[str, str]]:
    """Rows of docs/observability.md's metrics table: name → (type, labels)."""
    text = METRICS_DOC.read_text()
    section = text[text.index("## Metrics") :]
    rows = re.findall(r"^\| `(tessera_\w+)` \| (\w+) \| ([^|]*) \|", section, re.M)
    return {name: (kind, labels.strip()) for name, kind, labels in rows}


def test_the_readme_table_lists_every_metric_with_its_type_and_labels() -> None:
    table = readme_metrics()
    defined = {
        m.name: (m.type, ", ".join(f"`{label}`" for label in m.labels)) for m in metrics.catalog()
    }
    assert table == defined


def test_counters_carry_the_total_suffix_they_are_scraped_with() -> None:
    names = {m.name: m.type for m in metrics.catalog()}
    assert names["tessera_reconciles_total"] == "counter"
    assert all(name.endswith("_total") for name, kind in names.items() if kind == "counter")


def test_the_clients_writes_reach_the_metric_through_the_callback_tessera_run_installs() -> None:
    def count() -> float:
        return REGISTRY.get_sample_value("tessera_api_writes_total", {"verb": "patch"}) or 0.0

    before = count()
    writes = WriteCounter({}, on_write=metrics.count_write)  # as Kube.from_kubeconfig builds it
    writes.add("patch")
    writes.add("patch")
    assert writes.counts == {"patch": 2}
    assert count() == before + 2
    WriteCounter({}).add("patch")  # a client without the callback (a test's, the agent's)
    assert count() == before + 2


@pytest.fixture(scope="module")
def spans() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exporter = InMemorySpanExporter()
    provider = tracing.configure(exporter)
    assert provider is not None
    yield exporter, provider


def test_without_otel_variables_tracing_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert tracing.configure() is None


def test_a_reconcile_span_holds_one_child_span_per_action(
    spans: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    exporter, provider = spans
    exporter.clear()
    with tracing.span("reconcile", kind="NodePoolGeometry", name="pool-a"):
        with tracing.span("Cordon", node="gpu-1", reason="geometry 3f9a differs"):
            pass
        with tracing.span("Evict", node="gpu-1", reason="drain gpu-1"):
            pass
    provider.force_flush()
    finished = {s.name: s for s in exporter.get_finished_spans()}
    assert set(finished) == {"reconcile", "Cordon", "Evict"}
    parent = finished["reconcile"]
    assert dict(parent.attributes or {}) == {"kind": "NodePoolGeometry", "name": "pool-a"}
    for child in ("Cordon", "Evict"):
        assert finished[child].parent is not None
        assert finished[child].parent.span_id == parent.context.span_id
    assert dict(finished["Cordon"].attributes or {})["reason"] == "geometry 3f9a differs"


def record(message: str, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("tessera.rollout", logging.INFO, __file__, 1, message, (), None)
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def test_log_lines_inside_spans_carry_the_object_the_action_and_its_reason() -> None:
    formatter = logs.LogfmtFormatter()
    with tracing.span("reconcile", kind="NodePoolGeometry", name="pool-a"):
        outside = formatter.format(record("planning"))
        with tracing.span("Cordon", node="gpu-1", reason="1 of 2 slots free"):
            inside = formatter.format(record("cordoned"))
    after = formatter.format(record("idle"))
    assert "object=NodePoolGeometry/pool-a" in outside and "action=" not in outside
    assert inside.endswith(
        'msg=cordoned object=NodePoolGeometry/pool-a action=Cordon node=gpu-1 reason="1 of 2 slots free"'
    )
    assert "object=" not in after


def test_logfmt_quotes_what_needs_quoting_and_extra_fields_win() -> None:
    line = logs.LogfmtFormatter().format(record('say "hi"\nnow', reason="because=yes"))
    assert re.match(r"^ts=\S+Z level=info logger=tessera.rollout ", line)
    assert 'msg="say \\"hi\\"\\nnow"' in line
    assert 'reason="because=yes"' in line
    assert "\n" not in line
