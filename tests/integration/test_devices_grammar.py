"""The API server and Tessera's parsers agree on every value, and refusals show the value.

Each row of tests/data/devices.yaml (a layout's ``devices``) and of the quota table below is
sent to the real API server (server-side dry run) and to the parser the operator and
``tessera plan`` use; both must give the same verdict. A refusal must name the field and show
the offending value: a CEL rule alone prints ``Invalid value: ""`` for an int-or-string field
(the API server shows the schema's type there, never the value).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import TenantQuotaWrapper, custom
from tessera.api.v1alpha1 import devices as grammar
from tessera.api.v1alpha1 import quantity

from .conftest import ROOT, Kubectl

TABLE = yaml.safe_load((ROOT / "tests" / "data" / "devices.yaml").read_text(encoding="utf-8"))
VALUES = [row["devices"] for row in TABLE["valid"] + TABLE["invalid"]]
QUANTITIES: list[int | str] = [
    *[4, 0, "4", "1k", "2M", "1e3", "1E3", "1Ki", "2Mi", "2.5k", "+3", "1E", "007", "9E18"],
    *[-1, "0.5", "1.5", "500m", "-1", "", "1Q", " 1", "1e30", "1e19", "9223372036854775807"],
    # where Kubernetes' own reading decides (tessera.api.v1alpha1.quantity mirrors it)
    *["k", "Ki", "0m", "1000m", "1.0", ".5", "5.", ".5k", "+.5k", "0.0k", "1.000k", "-0", "-0.0"],
    *["1.5Ki", "0.5Ki", "1Ti", "99Ti", "100Ti", "99999999999Ki", "999999999999Ki", "99999Gi"],
    *["999999Gi", "1Pi", "10E", "9E", "1e-3", "1000e-3", "1e+3", "1e0", "1.5e1", "9.2e18"],
    *["0.00", "123456789012345678", ".5e1", "5.e0", "0e99", "1e", "1K", "1 k", "0x10", "1_000"],
]


def _refusals(kubectl: Kubectl, docs: list[dict[str, Any]]) -> dict[str, str]:
    """Server-side dry run of every document in one kubectl call; name -> error lines."""
    # JSON documents: YAML would read an unquoted 1e3 as a number, not the string under test
    stream = "\n---\n".join(json.dumps(doc) for doc in docs)
    result = kubectl("create", "--dry-run=server", "-f", "-", stdin=stream)
    refused: dict[str, str] = {}
    for line in result.stderr.splitlines():
        match = re.search(r'"(grammar-\d+|count-\d+)" is invalid: (.*)', line)
        if match:
            refused[match[1]] = match[2]
    accepted = set(re.findall(r"/(grammar-\d+|count-\d+) created", result.stdout))
    assert accepted | set(refused) == {d["metadata"]["name"] for d in docs}, result.stderr
    return refused


def _pool(i: int, devices: Any) -> dict[str, Any]:
    layouts = [{"devices": devices, "profiles": {"1g.10gb": 7}}]
    spec = {"nodeSelector": {"matchLabels": {"p": "q"}}, "mig": {"layouts": layouts}}
    return custom("NodePoolGeometry", f"grammar-{i}", spec)


def _parses(devices: Any) -> str | None:
    try:
        grammar.parse(devices)
    except grammar.DevicesError as err:
        return str(err)
    return None


def test_the_api_server_and_the_devices_parser_agree_on_every_form(kubectl: Kubectl) -> None:
    refused = _refusals(kubectl, [_pool(i, v) for i, v in enumerate(VALUES)])
    disagreements = []
    for i, value in enumerate(VALUES):
        server, parser = refused.get(f"grammar-{i}"), _parses(value)
        if (server is None) != (parser is None):
            disagreements.append(f"{value!r}: API server {server!r}, parser {parser!r}")
            continue
        if server is not None:  # the refusal names the field and shows the value
            assert "spec.mig.layouts[0].devices" in server, server
            shown = str(value) if isinstance(value, int) else f'"{value}"'
            assert shown in server, server
    assert not disagreements, "\n".join(disagreements)


def _tenant(i: int, count: int | str) -> dict[str, Any]:
    return TenantQuotaWrapper(f"count-{i}").namespaces(t="u").hard({"nvidia.com/gpu": count}).obj()


def _whole(count: int | str) -> str | None:
    try:
        quantity.whole(count)
    except quantity.QuantityError as err:
        return str(err)
    return None


def test_the_api_server_and_the_quantity_parser_agree_on_whole_counts(kubectl: Kubectl) -> None:
    refused = _refusals(kubectl, [_tenant(i, v) for i, v in enumerate(QUANTITIES)])
    disagreements = []
    for i, value in enumerate(QUANTITIES):
        server, parser = refused.get(f"count-{i}"), _whole(value)
        if (server is None) != (parser is None):
            disagreements.append(f"{value!r}: API server {server!r}, parser {parser!r}")
            continue
        if server is not None:
            # CEL writes the map key in brackets, the schema's own checks after a dot
            assert re.search(r"spec\.hard(\[|\.)nvidia\.com/gpu", server), server
            if "Too long" in server:  # the schema's length check names the limit, not the value
                continue
            shown = str(value) if isinstance(value, int) else f'"{value}"'
            assert shown in server, server
    assert not disagreements, "\n".join(disagreements)


@pytest.mark.parametrize(
    ("manifest", "field", "value"),
    [
        ("npg-devices-out-of-range.yaml", "spec.mig.layouts[0].devices", "16"),
        ("npg-devices-reversed-range.yaml", "spec.vnpu.layouts[0].devices", '"3-0"'),
        ("tq-half.yaml", "spec.hard[nvidia.com/gpu]", '"0.5"'),
        ("tq-fraction.yaml", "spec.hard[nvidia.com/gpu]", '"1.5"'),
        ("tq-negative.yaml", "spec.hard.nvidia.com/gpu", "-1"),
    ],
)
def test_kubectl_apply_names_the_field_and_shows_the_value(
    kubectl: Kubectl, manifest: str, field: str, value: str
) -> None:
    path = ROOT / "tests" / "data" / "invalid" / manifest
    result = kubectl("apply", "--dry-run=server", "-f", str(path))
    assert result.returncode != 0
    assert f"{field}: Invalid value: " in result.stderr, result.stderr
    assert value in result.stderr.split(f"{field}: Invalid value: ", 1)[1], result.stderr


def test_a_quota_of_1k_passes_the_api_server(kubectl: Kubectl, tmp_path: Path) -> None:
    tenant = custom(
        "TenantQuota",
        "tq-1k",
        {
            "namespaceSelector": {"matchLabels": {"tessera.io/tenant": "tq-1k"}},
            "hard": {"nvidia.com/gpumem": "1k"},
            "total": {"nvidia.com/gpumem": "2Ki"},
        },
    )
    path = tmp_path / "tq-1k.yaml"
    path.write_text(yaml.safe_dump(tenant))
    out = kubectl.ok("apply", "--dry-run=server", "-f", str(path))
    assert "tq-1k" in out
