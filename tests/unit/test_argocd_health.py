"""Argo CD health checks of Tessera's kinds, run the way Argo CD's own test harness runs them.

For every ``resource_customizations/<group>/<Kind>/health.lua`` the cases in the sibling
``health_test.yaml`` are executed in a Lua 5.1 runtime (Argo CD embeds gopher-lua, a Lua 5.1)
with the live object as the global ``obj``, and the returned ``{status, message}`` must match
exactly. Each case runs twice: with the standard libraries (built-in customizations) and with
only the base library (how argocd-cm scripts run unless useOpenLibs is set).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import lua51

ROOT = Path(__file__).resolve().parents[2]
CUSTOMIZATIONS = ROOT / "deploy" / "argocd" / "resource_customizations"
SCRIPTS = sorted(CUSTOMIZATIONS.glob("*/*/health.lua"))
KINDS = ("NodePoolGeometry", "SharingPolicy", "TenantQuota")
# What every kind's tests must cover (file names under testdata/).
REQUIRED = {"healthy", "progressing", "reconciling", "degraded", "deleting", "new"}
VALID = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}


def cases() -> list[Any]:
    out = []
    for script in SCRIPTS:
        spec = yaml.safe_load((script.parent / "health_test.yaml").read_text())
        for case in spec["tests"]:
            kind = script.parent.name
            for libs in ("openlibs", "baselib"):
                out.append(
                    pytest.param(script, case, libs, id=f"{kind}-{case['inputPath']}-{libs}")
                )
    return out


def run_health(script: Path, obj: dict[str, Any], libs: str) -> dict[str, str]:
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    if libs == "baselib":
        runtime.execute("string, math, os, io, debug = nil, nil, nil, nil, nil")
    runtime.globals().obj = runtime.table_from(obj, recursive=True)
    result = runtime.execute(script.read_text())
    return {"status": result["status"], "message": result["message"]}


@pytest.mark.parametrize(("script", "case", "libs"), cases())
def test_health_case(script: Path, case: dict[str, Any], libs: str) -> None:
    obj = yaml.safe_load((script.parent / case["inputPath"]).read_text())
    assert run_health(script, obj, libs) == case["healthStatus"]


def test_every_kind_has_a_script_with_the_required_cases() -> None:
    assert sorted(p.parent.name for p in SCRIPTS) == sorted(KINDS)
    for script in SCRIPTS:
        spec = yaml.safe_load((script.parent / "health_test.yaml").read_text())
        inputs = {Path(case["inputPath"]).stem for case in spec["tests"]}
        assert inputs >= REQUIRED, f"{script.parent.name} lacks {REQUIRED - inputs}"
        assert {case["healthStatus"]["status"] for case in spec["tests"]} <= VALID
        on_disk = {p.stem for p in (script.parent / "testdata").glob("*.yaml")}
        assert on_disk == inputs, f"{script.parent.name}: testdata without a case or vice versa"


def test_a_status_without_conditions_is_never_healthy() -> None:
    obj = {"metadata": {"name": "x", "generation": 2}, "status": {"observedGeneration": 2}}
    for script in SCRIPTS:
        assert run_health(script, obj, "baselib") == {
            "status": "Progressing",
            "message": "Waiting for the Ready condition",
        }
