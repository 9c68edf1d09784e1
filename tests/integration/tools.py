"""Go tools the install tests use (kstatus, helm), built once by hack/build-tool.sh and cached."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

from devcluster.build_tool import ToolBuildError, build_tool

__all__ = ["CHART", "SERVICE_MONITOR_API", "ToolBuildError", "helm", "helm_template", "tool"]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "tessera"
# helm template offline knows no ServiceMonitor API: this says the cluster serves it.
SERVICE_MONITOR_API = ("--api-versions", "monitoring.coreos.com/v1/ServiceMonitor")


@cache
def tool(name: str) -> Path:
    return build_tool(name, timeout=900)


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` with the pinned Helm, offline unless ARGS name a kubeconfig."""
    return subprocess.run(
        [str(tool("helm")), *args], capture_output=True, text=True, timeout=60, check=False
    )


def helm_template(*values: str, extra: tuple[str, ...] = ()) -> str:
    """The chart rendered as release ``tessera`` in tessera-system, with ``--set`` VALUES."""
    args = ["template", "tessera", str(CHART), "--namespace", "tessera-system", "--include-crds"]
    for value in values:
        args += ["--set", value]
    out = helm(*args, *extra)
    assert out.returncode == 0, out.stderr
    return out.stdout
