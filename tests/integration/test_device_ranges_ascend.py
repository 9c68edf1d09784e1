"""An Ascend pool split by NPU ranges ("0-1" / "2,3"), through Tessera's real vNPU agent.

Like MIG, the vNPU schema always admitted ranges the operator then refused as impossible.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from builders import custom
from devcluster import fleet, npunode
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import condition, eventually

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
POOL = "dev-npu-split"


@pytest.fixture(scope="module")
def ascend_nodes(kube: Kube) -> Iterator[npunode.AscendNodes]:
    sims = npunode.AscendNodes(kube).start()
    fleet.create_nodes(kube, fleet.pool(POOL, "Ascend310P3", 1, devices=4))
    yield sims
    sims.stop()


def test_an_npu_pool_split_by_ranges_rolls_out(
    kube: Kube, operator: OperatorProcess, ascend_nodes: npunode.AscendNodes
) -> None:
    layouts = [
        {"devices": "0-1", "templates": {"vir04": 1, "vir04_3c": 1}},
        {"devices": "2,3", "templates": {"vir02": 2}},
    ]
    spec = {"nodeSelector": {"matchLabels": {c.POOL_LABEL: POOL}}, "vnpu": {"layouts": layouts}}
    kube.create(NPG, custom("NodePoolGeometry", POOL, spec))

    def ready() -> dict[str, Any] | None:
        obj = kube.get_or_none(f"{NPG}/{POOL}")
        cond = condition(obj, "Ready")
        current = obj and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
        return cond if current and cond and cond["status"] == "True" else None

    assert eventually(ready, 90, f"{POOL} Ready")["reason"] == "Succeeded"
    created = ascend_nodes.npu_smi_state(f"{POOL}-0")
    templates = {npu: sorted(v["template"] for v in made.values()) for npu, made in created.items()}
    assert templates == {
        "0": ["vir04", "vir04_3c"],
        "1": ["vir04", "vir04_3c"],
        "2": ["vir02", "vir02"],
        "3": ["vir02", "vir02"],
    }
    meta = kube.get(path_of("v1", "nodes", f"{POOL}-0"))["metadata"]
    assert meta["labels"][c.VNPU_CONFIG_STATE_LABEL] == "success"
