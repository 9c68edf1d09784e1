"""Commands that do not talk to the cluster never load the Kubernetes client nor kopf.

Both take seconds to import; they are the only imports the CLI defers into functions
(``cli/run.py``, ``cli/agent.py``, ``cli/plan_cluster.read_cluster``). Each case runs in a
fresh interpreter, since this test process has long loaded both.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from builders import NamespaceWrapper, TenantQuotaWrapper

PROBE = """
import json, sys
from tessera.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit_:
    code = exit_.code
loaded = [m for m in ("kopf", "kubernetes") if m in sys.modules]
print(json.dumps({"code": code, "loaded": loaded}))
"""


def _run(*argv: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_version_loads_neither_the_client_nor_kopf() -> None:
    assert _run("--version") == {"code": 0, "loaded": []}


def test_plan_from_a_snapshot_loads_neither_the_client_nor_kopf(tmp_path: Path) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump(NamespaceWrapper("team-a").obj()))
    manifest = tmp_path / "tq.yaml"
    quota = TenantQuotaWrapper("team-a").namespaces(**{"kubernetes.io/metadata.name": "a"})
    manifest.write_text(yaml.safe_dump(quota.hard({"nvidia.com/gpu": 1}).obj()))
    result = _run("plan", "-f", str(manifest), "--snapshot", str(snapshot))
    assert result == {"code": 2, "loaded": []}  # 2: changes (the TenantQuota is created)
