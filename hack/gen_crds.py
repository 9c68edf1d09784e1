#!/usr/bin/env python3
"""Generate crds/*.yaml from the pydantic models in tessera.api (the single source of truth).

pydantic emits JSON Schema 2020-12; a CRD needs a *structural* OpenAPI v3
schema. This script bridges the two: ``$ref``s are inlined, ``X | None``
becomes plain ``X`` (absence, not null, means "unset"), ``int | str`` becomes
``x-kubernetes-int-or-string``, ``propertyNames`` (not supported by CRDs)
becomes a CEL rule, and defaults are left to the operator so Git and the
cluster never disagree about fields nobody wrote.

    hack/gen_crds.py            write crds/
    hack/gen_crds.py --check    exit 1 if crds/ is stale (used by make verify)
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from tessera.api.constants import CATEGORY, GROUP, VERSION
from tessera.api.v1alpha1 import KINDS, KindInfo

Schema = dict[str, Any]
ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = ROOT / "crds"
DROPPED_KEYS = {"title", "default", "$defs", "discriminator"}


def _resolve(node: Any, defs: dict[str, Schema]) -> Any:
    """Inline every $ref (the API has no recursive types)."""
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _resolve({**target, **siblings}, defs)
    return {key: _resolve(value, defs) for key, value in node.items()}


def _collapse_any_of(node: Schema) -> Schema:
    """Turn the unions pydantic emits into the forms a structural schema allows."""
    options = node.pop("anyOf")
    non_null = [o for o in options if o.get("type") != "null"]
    if node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields"):
        return node  # the extension replaces the union
    if len(non_null) == 1:
        return {**non_null[0], **node}
    raise ValueError(f"cannot express union {options} in a structural schema")


def _key_rule(names: Schema) -> dict[str, str]:
    pattern = names["pattern"]
    return {
        "rule": f"self.all(k, k.matches(r'{pattern}'))",
        "message": names.get("description", f"keys must match {pattern}"),
    }


def structural(node: Any) -> Any:
    """Rewrite a resolved JSON Schema into a structural OpenAPI v3 schema."""
    if isinstance(node, list):
        return [structural(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {k: v for k, v in node.items() if k not in DROPPED_KEYS}
    if "anyOf" in node:
        node = {k: v for k, v in _collapse_any_of(node).items() if k not in DROPPED_KEYS}
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]  # structural schemas prune unknown fields instead
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if isinstance(node.get("exclusiveMinimum"), int | float) and not isinstance(
        node["exclusiveMinimum"], bool
    ):
        node["minimum"] = node["exclusiveMinimum"]
        node["exclusiveMinimum"] = True
    if "propertyNames" in node:
        rules = node.setdefault("x-kubernetes-validations", [])
        rules.insert(0, _key_rule(node.pop("propertyNames")))
    out: Schema = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: structural(sub) for name, sub in value.items()}
        elif key in {"items", "additionalProperties"} and isinstance(value, dict):
            out[key] = structural(value)
        else:
            out[key] = value
    if (
        out.get("type") == "object"
        and "properties" not in out
        and "additionalProperties" not in out
    ):
        out["x-kubernetes-preserve-unknown-fields"] = True
    return _ordered(out)


_ORDER = [
    "description",
    "type",
    "format",
    "enum",
    "pattern",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    "required",
    "properties",
    "additionalProperties",
    "items",
]


def _ordered(node: Schema) -> Schema:
    rank = {key: i for i, key in enumerate(_ORDER)}
    return dict(sorted(node.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def model_schema(model: Any) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    resolved = _resolve(raw, raw.get("$defs", {}))
    result: Schema = structural(resolved)
    return result


def crd(info: KindInfo) -> Schema:
    spec = model_schema(info.spec)
    spec["description"] = "Desired state; owned by Git."
    status = model_schema(info.status)
    status["description"] = "Observed state; written by Tessera."
    # kstatus reads an object without status as Current, before Tessera has seen it. The API
    # server fills this default in on every read until Tessera writes a status, so a new
    # object reads "generation 1, observed 0": InProgress for kstatus, Progressing for Argo CD.
    status["default"] = {"observedGeneration": 0}
    columns = [
        {
            "name": c.name,
            "type": c.type,
            "jsonPath": c.json_path,
            **({"priority": c.priority} if c.priority else {}),
            **({"description": c.description} if c.description else {}),
        }
        for c in info.columns
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{info.plural}.{GROUP}",
            "annotations": {"argocd.argoproj.io/sync-options": "ServerSideApply=true"},
            "labels": {"app.kubernetes.io/part-of": "tessera"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.singular,
                "shortNames": list(info.short_names),
                "categories": [CATEGORY],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "description": info.description,
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {
                                    "type": "string",
                                    "description": "tessera.io/v1alpha1",
                                },
                                "kind": {"type": "string", "description": info.kind},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


HEADER = "# Generated by hack/gen_crds.py from api/tessera/api/v1alpha1 — do not edit; run `make crds`.\n"


def render_all() -> dict[Path, str]:
    rendered = {
        CRD_DIR / f"{GROUP}_{info.plural}.yaml": HEADER
        + yaml.safe_dump(crd(info), sort_keys=False, width=100, allow_unicode=True)
        for info in KINDS
    }
    # config/crd refers to this folder as a kustomize base (a base may live outside the
    # kustomization root; plain files may not), so the folder carries its own kustomization.
    # It is named `Kustomization`, the one name kustomize accepts without a .yaml suffix, so
    # `kubectl apply -f crds/` still sees only the CRDs.
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [path.name for path in rendered],
    }
    rendered[CRD_DIR / "Kustomization"] = HEADER + yaml.safe_dump(kustomization, sort_keys=False)
    return rendered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if crds/ is stale")
    args = parser.parse_args(argv)
    rendered = render_all()
    if args.check:
        stale = [p for p, text in rendered.items() if not p.exists() or p.read_text() != text]
        extra = set(CRD_DIR.glob("*.yaml")) - set(rendered)
        for path in [*stale, *sorted(extra)]:
            print(f"stale: {path.relative_to(ROOT)} (run `make crds`)", file=sys.stderr)
        return 1 if stale or extra else 0
    CRD_DIR.mkdir(exist_ok=True)
    for path, text in rendered.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
