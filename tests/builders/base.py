"""The wrapper every builder extends: a raw manifest, changed one call at a time, then ``obj()``.

kueue's test wrappers are the model (``MakeWorkload(...).Priority(...).Obj()``): each method sets
one field and returns the wrapper, so a test reads as the object it wants and nothing else.
Keys keep the order they were first set in, so a built object equals the literal it replaces.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar, Self

Raw = dict[str, Any]


class Wrapper:
    """A manifest of ``kind`` named ``name``; subclasses add the fields of their kind."""

    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = ""

    def __init__(self, name: str) -> None:
        self._obj: Raw = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {"name": name},
        }

    @property
    def _meta(self) -> Raw:
        meta: Raw = self._obj["metadata"]
        return meta

    def namespace(self, ns: str) -> Self:
        self._meta["namespace"] = ns
        return self

    def label(self, key: str, value: str) -> Self:
        return self.labels({key: value})

    def labels(self, labels: Mapping[str, str]) -> Self:
        """Add ``labels`` (an empty mapping still writes ``metadata.labels: {}``)."""
        self._meta.setdefault("labels", {}).update(labels)
        return self

    def annotation(self, key: str, value: str) -> Self:
        return self.annotations({key: value})

    def annotations(self, annotations: Mapping[str, str]) -> Self:
        self._meta.setdefault("annotations", {}).update(annotations)
        return self

    def meta(self, **fields: Any) -> Self:
        """Any other metadata field: ``meta(resourceVersion="2", uid="u-1")``."""
        self._meta.update(fields)
        return self

    def obj(self) -> Raw:
        """The manifest, a fresh copy: the wrapper can go on building another one."""
        return copy.deepcopy(self._obj)
