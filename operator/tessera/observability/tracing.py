"""OpenTelemetry tracing: a span per reconcile and per action.

Configured by the standard ``OTEL_*`` variables (``OTEL_TRACES_EXPORTER``,
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME`` …). Without them the
tracer is a no-op, so tracing costs nothing unless someone asks for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from tessera.observability import logs

TRACER_NAME = "tessera"


def configure(exporter: SpanExporter | None = None) -> TracerProvider | None:
    """Install a tracer provider when OTEL_TRACES_EXPORTER asks for one (or a test passes one).

    Returns the provider (None when tracing stays off), so a caller can flush it.
    OpenTelemetry keeps the first provider a process installs.
    """
    choice = os.environ.get("OTEL_TRACES_EXPORTER", "none")
    if exporter is None and choice in ("", "none"):
        return None
    if exporter is None:
        exporter = ConsoleSpanExporter() if choice == "console" else OTLPSpanExporter()
    service = os.environ.get("OTEL_SERVICE_NAME", "tessera")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


@contextmanager
def span(span_name: str, /, **attributes: Any) -> Iterator[trace.Span]:
    """A span, and the same facts bound to every log line written inside it."""
    tracer = trace.get_tracer(TRACER_NAME)
    with (
        tracer.start_as_current_span(span_name, attributes=attributes) as current,
        logs.bound(**logs.span_fields(span_name, attributes)),
    ):
        yield current
