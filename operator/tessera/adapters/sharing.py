"""One copy of equal values in a long-lived cache: the pods of one ReplicaSet share theirs.

The pod index keeps a projection of every pod of the cluster (50,000 at the target scale).
Decoded from JSON, each pod brings its own copy of its namespace, node name, labels and
tolerations, although the pods of a Deployment carry the same ones: kept as they come,
they cost ~2 KiB a pod. ``Shared`` hands back the copy it already holds of an equal value.
Its tables are bounded: once full they start afresh (values already shared stay shared),
so pods with labels of their own (a StatefulSet's pod name) cannot make them grow for ever.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

T = TypeVar("T", bound=Hashable)
V = TypeVar("V", bound=Hashable)
LIMIT = 8192


class Shared:
    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._maps: dict[tuple[tuple[str, Hashable], ...], Mapping[str, Hashable]] = {}
        self._values: dict[Hashable, Hashable] = {}

    def text(self, value: str) -> str:
        return sys.intern(value)

    def mapping(self, value: Mapping[str, V]) -> Mapping[str, V]:
        """An equal mapping, shared: never to be changed by who receives it."""
        if not value:
            return _EMPTY
        key = tuple(value.items())
        kept = self._maps.get(key)
        if kept is None:
            if len(self._maps) >= self._limit:
                self._maps.clear()
            kept = self._maps[key] = {sys.intern(k): self.value(v) for k, v in key}
        return kept  # type: ignore[return-value]  # equal items, hence of the same types

    def value(self, value: T) -> T:
        kept = self._values.get(value)
        if kept is None:
            if len(self._values) >= self._limit:
                self._values.clear()
            kept = self._values[value] = value
        return kept  # type: ignore[return-value]  # equal, hence of the same type


_EMPTY: Mapping[str, Any] = {}
