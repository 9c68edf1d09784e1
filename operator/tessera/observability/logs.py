"""Structured logs: one ``key=value`` line per record, carrying the object and the action.

Log lines name what they are about through a context rather than through
every call site: ``tracing.span`` binds its attributes here, so everything
logged inside a reconcile carries ``object=Kind/name`` and everything logged
inside an action carries ``action=``, ``node=`` and ``reason=``. Call sites may
add more with ``extra={...}``. Tracebacks follow their line unchanged, so
``grep Traceback`` still finds them.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

# Keys a record may carry, in the order they are printed after ``msg``.
FIELDS = ("object", "action", "node", "namespace", "reason")
_context: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "tessera_log_context", default=MappingProxyType({})
)


@contextmanager
def bound(**fields: object) -> Iterator[None]:
    """Add ``fields`` to every record logged in this context (threads started by asyncio too)."""
    merged = {**_context.get(), **{k: str(v) for k, v in fields.items() if v not in (None, "")}}
    token = _context.set(merged)
    try:
        yield
    finally:
        _context.reset(token)


def span_fields(span_name: str, attributes: Mapping[str, Any]) -> dict[str, object]:
    """The log fields a tracing span stands for: a reconcile names its object, an action itself."""
    fields: dict[str, object] = {}
    if "kind" in attributes and "name" in attributes:
        fields["object"] = f"{attributes['kind']}/{attributes['name']}"
    elif span_name not in ("reconcile", "finalize"):
        fields["action"] = span_name
    for key in ("node", "namespace", "reason"):
        if key in attributes:
            fields[key] = attributes[key]
    return fields


def quote(value: str) -> str:
    """logfmt quoting: bare when safe, else double-quoted with ``\\`` and ``"`` escaped."""
    if value and not any(ch in value for ch in ' "=\\\n\t'):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        pairs = [
            ("ts", stamp + "Z"),
            ("level", record.levelname.lower()),
            ("logger", record.name),
            ("msg", record.getMessage()),
        ]
        fields = dict(_context.get())
        for key in FIELDS:
            value = getattr(record, key, None)
            if value not in (None, ""):
                fields[key] = str(value)
        pairs += [(key, fields[key]) for key in FIELDS if key in fields]
        line = " ".join(f"{key}={quote(value)}" for key, value in pairs)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: str = "INFO", style: str = "logfmt") -> None:
    """Root logging for ``tessera run``: logfmt (default) or the plain text format."""
    handler = logging.StreamHandler()
    if style == "logfmt":
        handler.setFormatter(LogfmtFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
