"""A pool split by device ranges ("0-3" / "4-7"), as a platform engineer writes it.

The schema always admitted ``devices: "0-3"``, but the operator refused every string but
``"all"`` and ``tessera plan`` showed ``-> impossible``. Here the split is previewed, applied
and rolled out on 8-GPU H100 nodes; the simulated MIG manager applies the mig-parted config
the operator wrote and the device plugin advertises what that config creates.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import custom
from devcluster import fleet, gpunode
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import condition, eventually, gpu_agents

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
SPLIT = [
    {"devices": "0-3", "profiles": {"3g.40gb": 2}},
    {"devices": "4-7", "profiles": {"1g.10gb": 7}},
]


@pytest.fixture(scope="module")
def agents(kube: Kube) -> Iterator[None]:
    with gpu_agents(kube):
        yield


def _pool(name: str, layouts: list[dict[str, Any]]) -> dict[str, Any]:
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: name}},
        "mig": {"layouts": layouts},
        "rollout": {"verifyTimeout": "2m", "drain": {"timeout": "1m"}},
    }
    return custom("NodePoolGeometry", name, spec)


def _plan(kubeconfig: Path, manifest: Path) -> tuple[int, dict[str, Any], str]:
    run = [sys.executable, "-m", "tessera.cli.main", "plan", "-f", str(manifest)]
    run.append(f"--kubeconfig={kubeconfig}")
    out = subprocess.run([*run, "-o", "json"], capture_output=True, text=True, timeout=60)
    text = subprocess.run(run, capture_output=True, text=True, timeout=60)
    doc = json.loads(out.stdout) if out.returncode != 1 else {}
    return out.returncode, doc, text.stdout + text.stderr


def _condition(kube: Kube, name: str, type_: str) -> dict[str, Any] | None:
    obj = kube.get_or_none(f"{NPG}/{name}")
    cond = condition(obj, type_)
    if obj and cond and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]:
        return cond
    return None


def test_a_pool_split_by_ranges_previews_and_rolls_out(
    kube: Kube, operator: OperatorProcess, agents: None, control_plane: Any, tmp_path: Path
) -> None:
    nodes = fleet.create_nodes(kube, fleet.pool("dev-split", "H100-80GB", 2))
    manifest = tmp_path / "split.yaml"
    manifest.write_text(yaml.safe_dump(_pool("dev-split", SPLIT)))
    code, preview, text = _plan(control_plane.kubeconfig, manifest)
    assert code == 2, text
    assert "impossible" not in text
    (changes,) = [o["changes"] for o in preview["objects"] if o["name"] == "dev-split"]
    assert [(ch["node"], ch["after"]) for ch in changes] == [
        (node, "0-3: 2x3g.40gb; 4-7: 7x1g.10gb; 8-15: whole GPU") for node in nodes
    ], changes

    kube.create(NPG, _pool("dev-split", SPLIT))

    def succeeded() -> dict[str, Any] | None:
        ready = _condition(kube, "dev-split", "Ready")
        return ready if ready and ready["status"] == "True" else None

    ready = eventually(succeeded, 120, "dev-split Ready")
    assert ready["reason"] == "Succeeded", ready
    mig_parted = kube.get(
        path_of(
            "v1",
            "configmaps",
            c.MIG_PARTED_CONFIGMAP_NAME,
            c.MIG_PARTED_CONFIGMAP_NAMESPACE,
        )
    )
    configs = yaml.safe_load(mig_parted["data"]["config.yaml"])["mig-configs"]
    for name in nodes:
        node = kube.get(path_of("v1", "nodes", name))
        applied = node["metadata"]["annotations"][gpunode.APPLIED_MIG]
        assert node["metadata"]["labels"][c.MIG_CONFIG_LABEL] == applied
        assert node["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] == "success"
        assert configs[applied] == [
            {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
            {"devices": [4, 5, 6, 7], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            {"devices": list(range(8, 16)), "mig-enabled": False},
        ]
        allocatable = node["status"]["allocatable"]
        assert allocatable["nvidia.com/mig-3g.40gb"] == "8"
        assert allocatable["nvidia.com/mig-1g.10gb"] == "28"
        assert "nvidia.com/gpu" not in allocatable or allocatable["nvidia.com/gpu"] == "0"
        assert not node["spec"].get("unschedulable")
    status = kube.get(f"{NPG}/dev-split")["status"]
    assert status["capacity"]["nvidia.com/mig-1g.10gb"] == str(2 * 28)
