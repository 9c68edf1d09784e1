"""What ``tessera plan`` reads from ``-f``: every input it cannot answer for is an error naming
the place (file, line, kind), never a skipped document and a false "No changes"."""

from __future__ import annotations

import copy
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from preview_builders import npg

from builders import LAYOUT_A
from tessera.cli import manifests as reading
from tessera.domain.preview.manifests import ManifestDocument, ManifestError, load, parse

ROOT = Path(__file__).resolve().parents[3]


def _doc(body: Any, source: str = "gitops/pools.yaml", line: int = 7) -> ManifestDocument:
    return ManifestDocument(source, line, body)


def _typo(kind: str = "NodePoolGeometry", api: str = "tessera.io/v1alpha1") -> dict[str, Any]:
    return {**npg("x", LAYOUT_A), "kind": kind, "apiVersion": api}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_typo(kind="NodePoolGeometrie"), "gitops/pools.yaml:7: tessera.io has no kind 'NodePoolGeometrie'"),
        (_typo(api="tessera.io/v1"), "gitops/pools.yaml:7: NodePoolGeometry x: apiVersion 'tessera.io/v1' is not served"),
        (_typo(api="tessera.io"), "apiVersion 'tessera.io' is not served"),
        (npg("x", LAYOUT_A, onFailure="Explode"), "gitops/pools.yaml:7: NodePoolGeometry/x: spec.rollout.onFailure"),
        ({"kind": "NodePoolGeometry", "apiVersion": "tessera.io/v1alpha1", "metadata": {}}, "without metadata.name"),
        ({**npg("H100_Pool", LAYOUT_A)}, "NodePoolGeometry 'H100_Pool': metadata.name must be a lowercase RFC 1123"),
        ({**npg("a" * 254, LAYOUT_A)}, "metadata.name must be a lowercase RFC 1123"),
        ("just text", "gitops/pools.yaml:7: not a Kubernetes object"),
        ({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}, "kustomize renders it"),
        ({"apiVersion": "kustomize.config.k8s.io/v1alpha1", "kind": "Component"}, "kustomize renders it"),
    ],
)  # fmt: skip
def test_documents_tessera_cannot_answer_for_are_errors_naming_the_place(
    body: Any, message: str
) -> None:
    with pytest.raises(ManifestError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse([_doc(body)])


def test_other_kinds_are_skipped_with_a_note() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    kept, notes = parse([_doc(config_map), _doc(None), _doc(npg("a", LAYOUT_A))])
    assert [m["metadata"]["name"] for m in kept] == ["a"]
    assert notes == ["skipped ConfigMap x: not a Tessera object"]


def test_an_object_twice_names_both_places() -> None:
    with pytest.raises(
        ManifestError, match=r"b.yaml:3: NodePoolGeometry/a appears twice \(also a.yaml:1\)"
    ):
        parse([_doc(npg("a", LAYOUT_A), "a.yaml", 1), _doc(npg("a", LAYOUT_A), "b.yaml", 3)])  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: b\n c: d: e\n", "pools.yaml:2:3: mapping values are not allowed here"),
        ("kind: A\n---\nkind: B\n  x: [\n", "pools.yaml:4:4: "),
        ("metadata: {name: a}\nspec: {}\nspec: {x: 1}\n", "pools.yaml:3:1: key 'spec' appears twice"),
        ("a: \"unterminated\n", "pools.yaml:2:1: "),
        ("\t- tab\n", "pools.yaml:1:1: "),
    ],
)  # fmt: skip
def test_malformed_yaml_names_file_line_and_column(text: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        load(text, "pools.yaml")


def test_documents_know_the_line_they_start_on() -> None:
    text = "# pools\nkind: A\n---\n\n---\nkind: B\n"
    docs = load(text, "f.yaml")
    assert [(d.line, d.body) for d in docs if d.body] == [(2, {"kind": "A"}), (6, {"kind": "B"})]
    assert len(docs) == 3  # the empty one between them is kept (and skipped by parse)
    assert {d.line for d in load(text, "rendered", generated=True)} == {0}


# -- -f: files, directories, kustomizations ------------------------------------------------------


def _write(path: Path, *docs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_a_directory_is_its_yaml_yml_and_json_files(tmp_path: Path) -> None:
    _write(tmp_path / "a.yaml", npg("a", LAYOUT_A))
    _write(tmp_path / "b.yml", npg("b", LAYOUT_A))
    (tmp_path / "c.json").write_text('{"apiVersion": "v1", "kind": "ConfigMap"}')
    _write(tmp_path / "sub" / "d.yaml", npg("d", LAYOUT_A))  # not recursed, like Argo CD
    (tmp_path / "README.md").write_text("# not a manifest")
    docs = reading.documents([str(tmp_path)], None)
    assert [(Path(d.source).name, d.body["kind"]) for d in docs] == [
        ("a.yaml", "NodePoolGeometry"),
        ("b.yml", "NodePoolGeometry"),
        ("c.json", "ConfigMap"),
    ]


@pytest.mark.parametrize("marker", ["kustomization.yaml", "kustomization.yml", "Kustomization"])
@pytest.mark.parametrize("given", ["directory", "file"])
def test_a_kustomization_without_kubectl_is_refused(
    tmp_path: Path, marker: str, given: str
) -> None:
    _write(tmp_path / "pools.yaml", npg("a", LAYOUT_A))
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
    _write(tmp_path / marker, {**kustomization, "resources": ["pools.yaml"]})
    target = tmp_path if given == "directory" else tmp_path / marker
    with pytest.raises(ManifestError, match=f"is a kustomization \\({marker}\\).*no kubectl"):
        reading.documents([str(target)], None)


def test_this_repositorys_argo_cd_folder_is_a_kustomization() -> None:
    with pytest.raises(ManifestError, match="deploy/argocd/install is a kustomization"):
        reading.documents([str(ROOT / "deploy" / "argocd" / "install")], None)


def test_a_renderer_that_fails_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path / "kustomization.yaml", {"resources": ["missing.yaml"]})
    with pytest.raises(ManifestError, match=r"kustomize .* failed"):
        reading.documents([str(tmp_path)], str(tmp_path / "no-such-kubectl"))


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ({"Chart.yaml": "name: x\n", "values.yaml": "a: 1\n"}, "is a Helm chart"),
        ({"README.md": "nothing to apply"}, "no \\*.yaml, \\*.yml or \\*.json file"),
    ],
)
def test_folders_plan_cannot_read_are_refused(
    tmp_path: Path, layout: dict[str, str], message: str
) -> None:
    for name, text in layout.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ManifestError, match=message):
        reading.documents([str(tmp_path)], None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("mig", "layouts", 0, "profiles", "3g.40gb"), "1"),  # a string where the schema has an integer
        (("mig", "layouts", 0, "profiles", "3g.40gb"), True),
        (("mig", "layouts", 0, "devices"), True),  # int-or-string: a boolean is neither
        (("rollout", "maxUnavailable"), True),
    ],
)  # fmt: skip
def test_a_spec_is_typed_as_strictly_as_the_api_server_types_it(
    field: tuple[Any, ...], value: Any
) -> None:
    """Coercing ``"1"`` or ``true`` to 1 would preview what the API server refuses to store."""
    body = copy.deepcopy(npg("x", LAYOUT_A, maxUnavailable=1))
    target = body["spec"]
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = value
    with pytest.raises(
        ManifestError, match=rf"NodePoolGeometry/x: spec\.{re.escape('.'.join(map(str, field)))}: "
    ):
        parse([_doc(body)])


def test_a_list_stands_for_its_items_as_kubectl_apply_reads_it() -> None:
    """``kubectl get npg -o yaml`` writes a List; skipping it as "not a Tessera object" was a
    false "No changes"."""
    listed = {"apiVersion": "v1", "kind": "List", "items": [npg("a", LAYOUT_A), npg("b", LAYOUT_A)]}
    kept, notes = parse([_doc(listed)])
    assert [m["metadata"]["name"] for m in kept] == ["a", "b"] and notes == []
    typo = {**listed, "items": [_typo(kind="NodePoolGeometrie")]}
    with pytest.raises(
        ManifestError, match=r"gitops/pools.yaml:7 items\[0\]: tessera.io has no kind"
    ):
        parse([_doc(typo)])


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n# pools\n---\n", "\r\n"])
@pytest.mark.parametrize("given", ["file", "stdin"])
def test_an_input_without_objects_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, given: str
) -> None:
    """``kubectl apply`` refuses it too; an empty stdin is often a ``helm template`` that failed
    upstream, and "No changes" would hide it."""
    (tmp_path / "pools.yaml").write_text(text)
    _write(tmp_path / "other.yaml", npg("a", LAYOUT_A))
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    name = str(tmp_path / "pools.yaml") if given == "file" else "-"
    with pytest.raises(ManifestError, match=f"^{re.escape(name)}: no object to apply"):
        reading.documents([str(tmp_path / "other.yaml"), name], None)


def test_a_crlf_file_reads_as_its_lf_twin(tmp_path: Path) -> None:
    text = yaml.safe_dump(npg("a", LAYOUT_A))
    (tmp_path / "crlf.yaml").write_bytes(text.replace("\n", "\r\n").encode())
    (tmp_path / "lf.yaml").write_text(text)
    crlf, lf = (reading.documents([str(tmp_path / f)], None) for f in ("crlf.yaml", "lf.yaml"))
    assert [d.body for d in crlf] == [d.body for d in lf]


def test_a_folder_of_folders_says_subfolders_are_not_read(tmp_path: Path) -> None:
    _write(tmp_path / "pools" / "a.yaml", npg("a", LAYOUT_A))
    with pytest.raises(ManifestError, match="subdirectories are not read"):
        reading.documents([str(tmp_path)], None)


def test_a_file_that_is_not_utf8_is_an_error_naming_its_line(tmp_path: Path) -> None:
    """It was a UnicodeDecodeError traceback; a BOM (Windows editors) still reads."""
    bad = tmp_path / "pools.yaml"
    bad.write_bytes(b"kind: ConfigMap\ndata:\n  x: caf\xe9\n")
    with pytest.raises(ManifestError, match=r"pools.yaml:3: not UTF-8 text \(byte 0xe9\)"):
        reading.documents([str(bad)], None)
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbf" + yaml.safe_dump(npg("a", LAYOUT_A)).encode())
    assert [d.body["kind"] for d in reading.documents([str(bom)], None)] == ["NodePoolGeometry"]


INVALID = sorted((ROOT / "tests" / "data" / "invalid").glob("*.yaml"))


@pytest.mark.parametrize("manifest", INVALID, ids=lambda p: p.stem)
def test_every_manifest_the_api_server_refuses_is_refused_by_the_plan(manifest: Path) -> None:
    """tests/integration/test_api_surface.py has the real API server refuse each of these with
    the message on its first line; a plan that previewed one as a change (12 of them did) is
    green where the sync fails."""
    expected = manifest.read_text().splitlines()[0].removeprefix("# expect: ")
    with pytest.raises(ManifestError) as refused:
        parse(load(manifest.read_text(), manifest.name))
    said = str(refused.value)
    assert said.startswith(f"{manifest.name}:2: ") and ": spec" in said, said
    pydantic = ("Value error", "should", "Field required", "Extra inputs")
    assert expected in said or any(words in said for words in pydantic), said  # CEL: its message


def _cel_messages(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for rule in node.get("x-kubernetes-validations", []):
            if "message" in rule:  # messageExpressions: the device and quantity grammars
                yield rule["message"]
        for key, value in node.items():
            if key != "status":
                yield from _cel_messages(value)
    elif isinstance(node, list):
        for value in node:
            yield from _cel_messages(value)


def test_every_cel_rule_of_the_crds_has_its_twin_in_the_plan() -> None:
    """A CEL rule added to a model without a twin in ``api.v1alpha1.rules`` would let the
    plan preview, as a change, what the API server refuses."""
    from tessera.api.v1alpha1 import devices
    from tessera.api.v1alpha1 import rules as manifest_rules

    twins = manifest_rules.messages() | {devices.LAYOUTS_MESSAGE}  # that one: the models'
    found = {
        message
        for crd in sorted((ROOT / "crds").glob("*.yaml"))
        for message in _cel_messages(yaml.safe_load(crd.read_text())["spec"]["versions"])
    }
    assert found - twins == set()


@pytest.mark.parametrize(
    ("kind", "api", "said"),
    [
        ("Nodepoolgeometry", None, "(did you mean NodePoolGeometry, apiVersion tessera.io/v1alpha1?)"),
        ("SharingPolicies", "v1", "(did you mean SharingPolicy, apiVersion tessera.io/v1alpha1?)"),
        ("ConfigMap", "v1", "not a Tessera object: "),
    ],
)  # fmt: skip
def test_input_with_no_tessera_object_is_an_error_not_no_changes(
    kind: str, api: str | None, said: str
) -> None:
    """Every object skipped: "No changes" would be a false green, since nothing was compared."""
    body = {"kind": kind, "metadata": {"name": "x"}, **({"apiVersion": api} if api else {})}
    with pytest.raises(ManifestError) as refused:
        parse([_doc(body)])
    message = str(refused.value)
    assert message.startswith(
        "gitops/pools.yaml:7: no Tessera object in the input, nothing to plan: "
    ), message
    assert f"skipped {kind} x: not a Tessera object" in message and said in message + ": "


def test_a_near_miss_kind_in_tessera_io_is_named() -> None:
    body = {"apiVersion": "tessera.io/v1alpha1", "kind": "TenantQuotas", "metadata": {"name": "x"}}
    with pytest.raises(ManifestError, match=r"no kind 'TenantQuotas' \(did you mean TenantQuota\?"):
        parse([_doc(body)])
