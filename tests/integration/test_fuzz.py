"""Bad input, generated: custom resources thrown at the API server, then at the operator.

Two sources of objects, both built with hypothesis and bounded so the module
runs in seconds:

* from the schema the API server enforces (``crds/``, generated from the
  pydantic models in ``api/tessera/api/v1alpha1``): shapes that mostly fit, with wrong
  types, out-of-range numbers and junk strings mixed in;
* mutations of ``config/samples``: one field replaced by junk or deleted, or an
  unknown field added.

Every object is created with ``dryRun=All``. The promises: a rejection names
the field it rejects (a 422 whose causes carry field paths); an accepted
object that the operator's models refuse makes it report ``Stalled`` with a
message naming the field, never a crash. The worst examples found are kept in
``tests/data/fuzz/`` and replayed by the last test: a rejected one must still
be rejected naming its field; one the API admits is created for real (on a
selector that matches nothing) and must come back ``Stalled`` naming it.
Fuzzing with a budget of 3,000 examples found no object that the API server
admits and the models refuse; the generator test fails until any it finds is
added to the corpus.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from tessera.adapters.kube import ApiError, Kube, Obj
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec

from .conftest import ROOT, OperatorProcess
from .helpers import condition, eventually

KINDS: dict[str, tuple[str, type[BaseModel]]] = {
    "NodePoolGeometry": ("nodepoolgeometries", NodePoolGeometrySpec),
    "SharingPolicy": ("sharingpolicies", SharingPolicySpec),
    "TenantQuota": ("tenantquotas", TenantQuotaSpec),
}
CORPUS = sorted((ROOT / "tests" / "data" / "fuzz").glob("*.yaml"))
SAMPLES = [
    doc
    for path in sorted((ROOT / "config" / "samples").glob("*_*.yaml"))
    for doc in yaml.safe_load_all(path.read_text())
    if doc and doc.get("kind") in KINDS
]
NOTHING = {"matchLabels": {"fuzz.tessera.io/matches": "nothing"}}  # for objects created for real
SKIPPED = "validation rules were not checked"  # the API server's note, not a rejection
FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def collection(kind: str) -> str:
    return f"/apis/tessera.io/v1alpha1/{KINDS[kind][0]}"


# -- generating -----------------------------------------------------------------------------------


def _schema(kind: str) -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / f"tessera.io_{KINDS[kind][0]}.yaml").read_text())
    spec: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(spec["properties"]["spec"])


JUNK: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def shaped(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Mostly what ``schema`` describes, sometimes just outside it, now and then junk."""
    return st.one_of(_fitting(schema, depth), _fitting(schema, depth), JUNK)


def _fitting(schema: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    if schema.get("x-kubernetes-int-or-string"):
        return st.integers(-3, 20) | st.sampled_from(["all", "0-3", "1,2", "50%", "7", "x", ""])
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from([*schema["enum"], "Bogus"])
    if kind == "object":
        if depth > 4:
            return st.just({})
        props = schema.get("properties") or {}
        if props:
            required = set(schema.get("required") or [])
            return st.fixed_dictionaries(
                {k: shaped(v, depth + 1) for k, v in props.items() if k in required},
                optional={
                    **{k: shaped(v, depth + 1) for k, v in props.items() if k not in required},
                    "unknownField": JUNK,
                },
            )
        values = schema.get("additionalProperties") or {"type": "string"}
        keys = st.sampled_from(["nvidia.com/gpu", "1g.10gb", "3g.40gb", "vir02", "tessera.io/pool"])
        return st.dictionaries(keys | st.text(max_size=8), shaped(values, depth + 1), max_size=3)
    if kind == "array":
        return st.lists(shaped(schema.get("items") or {}, depth + 1), max_size=3)
    if kind == "string":
        near = ["30m", "1h30m", "2s", "forever", "1g.10gb", "09:00", "25:61", "Mon", "x" * 70]
        return st.sampled_from(near) | st.text(max_size=10)
    if kind == "integer":
        low, high = schema.get("minimum", -5), schema.get("maximum", 100)
        return st.integers(int(low) - 2, int(high) + 2)
    if kind == "number":
        return st.floats(-1, 20, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    return JUNK


@st.composite
def from_schema(draw: st.DrawFn) -> tuple[str, Obj]:
    kind = draw(st.sampled_from(sorted(KINDS)))
    spec = draw(_fitting(_schema(kind), 0))
    return kind, {"apiVersion": "tessera.io/v1alpha1", "kind": kind, "spec": spec}


@st.composite
def mutated_sample(draw: st.DrawFn) -> tuple[str, Obj]:
    sample = copy.deepcopy(draw(st.sampled_from(SAMPLES)))
    paths = list(_paths(sample["spec"], ("spec",)))
    path = draw(st.sampled_from(paths))
    parent: Any = sample
    for step in path[:-1]:
        parent = parent[step]
    what = draw(st.sampled_from(["replace", "delete", "add"]))
    if what == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif what == "add" and isinstance(parent[path[-1]], dict):
        parent[path[-1]][draw(st.text(min_size=1, max_size=8))] = draw(JUNK)
    else:
        parent[path[-1]] = draw(JUNK)
    return sample["kind"], sample


def _paths(value: Any, prefix: tuple[Any, ...]) -> Any:
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, (*prefix, i))


# -- checking -------------------------------------------------------------------------------------


def dry_run(kube: Kube, kind: str, obj: Obj, name: str) -> Obj | ApiError:
    """The object as the API server would store it (pruned, defaulted), or its rejection."""
    body = {**obj, "metadata": {"name": name}}
    try:
        return kube.create(f"{collection(kind)}?dryRun=All", body)
    except ApiError as err:
        return err


def rejected_fields(err: ApiError) -> list[str]:
    """Field paths of a 422's causes, less the API server's note that it skipped CEL rules."""
    causes = (err.body.get("details") or {}).get("causes") or []
    return [str(c.get("field", "")) for c in causes if SKIPPED not in str(c.get("message"))]


def assert_rejection_names_the_field(err: ApiError, obj: Obj) -> None:
    assert err.status == 422, (err, obj)
    fields = rejected_fields(err)
    assert fields and all(f.startswith("spec") for f in fields), (err.message, obj)


def model_error(kind: str, obj: Obj) -> str | None:
    """The operator's own reading of the spec: the first error as it would report it."""
    try:
        KINDS[kind][1].model_validate(obj.get("spec") or {})
    except ValidationError as err:
        first = err.errors()[0]
        return "spec." + ".".join(str(p) for p in first["loc"])
    return None


def check(kube: Kube, kind: str, obj: Obj, found: list[tuple[str, Obj, str]]) -> None:
    stored = dry_run(kube, kind, obj, "fuzz")
    if isinstance(stored, ApiError):
        assert_rejection_names_the_field(stored, obj)
        return
    where = model_error(kind, stored)
    if where is not None:  # admitted by the API server, refused by the operator's models
        found.append((kind, obj, where))


@pytest.mark.parametrize("source", [from_schema, mutated_sample], ids=lambda s: s.__name__)
def test_generated_objects_are_rejected_naming_the_field(
    kube: Kube, source: Callable[[], st.SearchStrategy[tuple[str, Obj]]]
) -> None:
    found: list[tuple[str, Obj, str]] = []

    @FUZZ
    @given(source())
    def throw(case: tuple[str, Obj]) -> None:
        check(kube, *case, found)

    throw()
    # Objects the API server admits but the operator refuses: each must be in the corpus,
    # where the replay below proves the operator says Stalled and names the field.
    kept = {(_load(p)[0]["kind"], _load(p)[1]) for p in CORPUS}
    missing = [(kind, where) for kind, _, where in found if (kind, where) not in kept]
    assert not missing, f"add these API/model mismatches to tests/data/fuzz/: {missing}"


# -- the corpus, replayed for real ----------------------------------------------------------------


def _load(path: Path) -> tuple[Obj, str]:
    """A corpus file: ``# field: spec.x.y`` on the first line, then the object."""
    text = path.read_text()
    match = re.match(r"# field: (\S+)\n", text)
    assert match, f"{path.name} must start with '# field: <path>'"
    return yaml.safe_load(text), match.group(1)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_is_rejected_or_reported_naming_the_field(
    kube: Kube, operator: OperatorProcess, path: Path
) -> None:
    obj, field = _load(path)
    kind = obj["kind"]
    stored = dry_run(kube, kind, obj, path.stem)
    if isinstance(stored, ApiError):
        assert_rejection_names_the_field(stored, obj)
        assert any(f.startswith(field) for f in rejected_fields(stored)), (field, stored)
        return
    assert model_error(kind, stored) == field
    real = copy.deepcopy(obj)
    selector = "namespaceSelector" if kind == "TenantQuota" else "nodeSelector"
    if selector in real["spec"] or kind != "SharingPolicy":
        real["spec"][selector] = NOTHING  # whatever the operator does, it touches nothing
    mark = len(operator.log())
    kube.create(collection(kind), {**real, "metadata": {"name": path.stem}})
    try:

        def stalled() -> dict[str, Any] | None:
            cond = condition(kube.get(f"{collection(kind)}/{path.stem}"), "Stalled")
            return cond if cond and cond["status"] == "True" else None

        cond = eventually(stalled, 30, f"{kind}/{path.stem} Stalled")
        assert cond["reason"] == "InvalidSpec" and cond["message"].startswith(field), cond
    finally:
        kube.delete(f"{collection(kind)}/{path.stem}")
        eventually(
            lambda: kube.get_or_none(f"{collection(kind)}/{path.stem}") is None,
            30,
            f"{kind}/{path.stem} deleted",
        )
    assert "Traceback" not in operator.log()[mark:]
