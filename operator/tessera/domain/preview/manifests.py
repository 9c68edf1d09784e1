"""The manifests ``tessera plan`` reads: YAML text → Tessera objects, or an error naming the place.

A preview is only as good as its input, so nothing a reviewer's pipeline feeds
it is dropped silently (a false "No changes" is worse than an error):

* YAML that does not parse, or a mapping with a key twice (``kubectl apply``
  refuses both), is an error naming the file, line and column;
* a ``tessera.io`` document of a kind or version Tessera does not serve (a
  typo: ``NodePoolGeometrie``, ``tessera.io/v1``) is an error naming the file
  and the kind; the API server would refuse it, so Argo CD's sync would fail;
* a Kustomization document is an error: kustomize renders it (``tessera plan
  -f DIR`` does, as Argo CD does), it is never applied as an object;
* a List (``kind: List``, what ``kubectl get -o yaml`` writes) stands for its
  items, as ``kubectl apply`` and Argo CD read it;
* other kinds (Deployments, CRDs ...) are skipped with a note;
* a spec is validated strictly, as the API server's schema types it: ``"1"``
  or ``true`` where an integer belongs is an error, not coerced to 1; so are
  the CRD's CEL rules the models do not check (``manifest_rules``).

Pure: text in, values out; reading files and running kustomize is the CLI's.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1 import KINDS
from tessera.api.v1alpha1 import rules as manifest_rules

Raw = Mapping[str, Any]

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
"""The file names that make a directory a kustomization (kustomize's, and Argo CD's test)."""
KUSTOMIZE_GROUP = "kustomize.config.k8s.io"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ManifestError(ValueError):
    """A manifest the API server would reject, or one ``tessera plan`` cannot read."""


@dataclass(frozen=True)
class ManifestDocument:
    """One YAML document and where it came from."""

    source: str  # a file, "-" for stdin, or "DIR (rendered by kustomize)"
    line: int  # where the document starts, 1-based; 0 when the text was generated
    body: Any

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line else self.source


class _Loader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; kubectl (and so Argo CD) refuses them."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"key {key!r} appears twice",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def decode(data: bytes, source: str) -> str:
    """A file's bytes as text; ManifestError naming the line when they are not UTF-8."""
    try:
        return data.decode()
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ManifestError(
            f"{source}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x}); "
            "Kubernetes reads manifests as UTF-8"
        ) from err


def load(text: str, source: str, *, generated: bool = False) -> list[ManifestDocument]:
    """Every document of ``text``; ``generated``: the text has no lines a person could open."""
    loader = _Loader(text)
    out: list[ManifestDocument] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            line = 0 if generated or node is None else node.start_mark.line + 1
            body = loader.construct_document(node) if node is not None else None
            out.append(ManifestDocument(source, line, body))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise ManifestError(f"{where}: {err.problem or err.context}") from err
    except yaml.YAMLError as err:
        raise ManifestError(f"{source}: {err}") from err
    finally:
        loader.dispose()
    return out


def nonempty(docs: list[ManifestDocument], given: str) -> list[ManifestDocument]:
    """``docs`` read from one ``-f`` argument, or ManifestError when they hold no object.

    ``kubectl apply`` refuses an input without objects too; to a preview, an empty
    file or an empty stdin (a ``helm template`` that failed upstream) is a mistake
    to report, never "No changes".
    """
    if all(doc.body is None for doc in docs):
        raise ManifestError(f"{given}: no object to apply (only comments or nothing at all)")
    return docs


def group_of(api_version: str) -> str:
    """``tessera.io/v1alpha1`` → ``tessera.io``; the core group (``v1``) is ``""``."""
    group, slash, _ = api_version.rpartition("/")
    return group if slash else ""


def items(documents: Iterable[ManifestDocument]) -> Iterator[ManifestDocument]:
    """The documents, each List (a ``...List`` kind with ``items``) replaced by its items."""
    for doc in documents:
        body = doc.body
        listed = body.get("items") if isinstance(body, Mapping) else None
        if isinstance(listed, list) and str(body.get("kind", "")).endswith("List"):
            yield from (
                ManifestDocument(f"{doc.where} items[{i}]", 0, o) for i, o in enumerate(listed)
            )
        else:
            yield doc


def parse(documents: Iterable[ManifestDocument]) -> tuple[list[Raw], list[str]]:
    """Tessera objects whose spec parses, and a note per other object skipped.

    Raises ManifestError naming the place, and the object and its first invalid field.
    """
    specs: dict[str, type[BaseModel]] = {k.kind: k.spec for k in KINDS}
    out: list[Raw] = []
    notes: list[str] = []
    seen: dict[tuple[str, str], str] = {}
    skipped_at: list[str] = []
    for doc in items(documents):
        body = doc.body
        if body is None:
            continue
        if not isinstance(body, Mapping) or "kind" not in body:
            raise ManifestError(f"{doc.where}: not a Kubernetes object: {str(body)[:60]!r}")
        kind, api = str(body["kind"]), str(body.get("apiVersion", ""))
        name = str((body.get("metadata") or {}).get("name", ""))
        group = group_of(api) or api  # "tessera.io" alone is a group without a version
        if group == KUSTOMIZE_GROUP:
            raise ManifestError(
                f"{doc.where}: a {kind} is not an object to apply: kustomize renders it; "
                "give its directory with -f and tessera plan renders it as Argo CD does"
            )
        if group != c.GROUP:
            near = _near_kind(kind, specs)
            hint = f" (did you mean {near}, apiVersion {c.API_VERSION}?)" if near else ""
            notes.append(f"skipped {kind} {name or '(unnamed)'}: not a Tessera object{hint}")
            skipped_at.append(doc.where)
            continue
        if kind not in specs:
            near = _near_kind(kind, specs)
            hint = f"did you mean {near}? " if near else ""
            raise ManifestError(
                f"{doc.where}: {c.GROUP} has no kind {kind!r} ({hint}its kinds: {', '.join(specs)})"
            )
        if api != c.API_VERSION:
            raise ManifestError(
                f"{doc.where}: {kind} {name or '(unnamed)'}: apiVersion {api!r} is not served; "
                f"Tessera serves {c.API_VERSION}"
            )
        if not name:
            raise ManifestError(f"{doc.where}: {kind} without metadata.name")
        if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            raise ManifestError(
                f"{doc.where}: {kind} {name!r}: metadata.name must be a lowercase RFC 1123 "
                "subdomain (a-z, 0-9, '-' and '.', at most 253 characters), as the API server "
                "requires"
            )
        if (kind, name) in seen:
            raise ManifestError(
                f"{doc.where}: {kind}/{name} appears twice (also {seen[kind, name]})"
            )
        seen[kind, name] = doc.where
        out.append(_validated(f"{doc.where}: {kind}/{name}", specs[kind], kind, body))
    if not out:  # "no changes" would be a false green: nothing was compared
        places = f"{', '.join(skipped_at)}: " if skipped_at else ""
        skipped = f": {'; '.join(notes)}" if notes else ""
        raise ManifestError(f"{places}no Tessera object in the input, nothing to plan{skipped}")
    return out, notes


def _validated(where: str, spec: type[BaseModel], kind: str, body: Raw) -> Raw:
    """``body`` as the API server would store it, once its spec passes the schema (the models,
    strictly) and the CEL rules; ManifestError naming ``where`` and the first invalid field."""
    if isinstance(body.get("spec"), Mapping):
        body = {**body, "spec": without_nulls(body["spec"])}
    try:
        spec.model_validate(body.get("spec") or {}, strict=True)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(["spec", *_path(body.get("spec"), first)])
        raise ManifestError(f"{where}: {field}: {first['msg']}") from err
    broken = manifest_rules.first_broken(kind, body.get("spec") or {})
    if broken is not None:  # a rule only the API server's CEL checks
        field = ".".join(p for p in ("spec", broken[0]) if p)
        raise ManifestError(f"{where}: {field}: {broken[1]}")
    return body


def without_nulls(value: Any) -> Any:
    """``value`` as the API server keeps it: every key whose value is null dropped, at any depth.

    No field of a Tessera spec is nullable or has a default, so the API server prunes each null
    before its schema and CEL rules see the object (``mig: null`` is no mig, not a mig block);
    the plan validates, and compares, what the server would store.
    """
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def _near_kind(kind: str, kinds: Iterable[str]) -> str | None:
    """The Tessera kind ``kind`` is a near miss of (another case, a letter off), if any."""
    known = list(kinds)
    same = [k for k in known if k.lower() == kind.lower()]
    near = same or difflib.get_close_matches(kind, known, n=1, cutoff=0.8)
    return near[0] if near else None


def _path(spec: Any, error: Any) -> list[str]:
    """Pydantic's error location as the spec's field path, without a union's member names
    (``devices.int``), which are no field a user could find; a missing field is named."""
    path: list[str] = []
    value = spec
    for key in error["loc"]:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            return [*path, str(key)] if error["type"] == "missing" else path
        path.append(str(key))
    return path
