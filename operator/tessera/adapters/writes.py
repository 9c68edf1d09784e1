"""What the client tells of its writes: a count per verb, and each write to those who track
what they wrote (the node cache's read-your-writes)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tessera.adapters.api_errors import Obj


@dataclass(frozen=True)
class WriteCounter:
    """Counts mutating requests, so benchmarks and tests can see API writes, and reports each
    one's verb to ``on_write`` (``tessera run`` counts them in a metric: the adapter knows
    nothing of metrics, so observability and adapters stay independent)."""

    counts: dict[str, int]
    on_write: Callable[[str], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def add(self, verb: str) -> None:
        with self._lock:  # writes run sixteen at a time; a pass's ``moved`` reads the total
            self.counts[verb] = self.counts.get(verb, 0) + 1
        if self.on_write is not None:
            self.on_write(verb)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())


class WriteWatcher(Protocol):
    def begin(self, path: str) -> Any:
        """A write to ``path`` goes out; the token returned comes back to ``end``."""

    def end(self, token: Any, returned: Obj | None, maybe: bool) -> None:
        """It came back: ``returned`` is the answer; ``None`` a failure, ``maybe`` landed."""
