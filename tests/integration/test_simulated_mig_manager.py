"""The simulated MIG manager refuses what the GPU would refuse, by its own placement table.

Tessera never writes an impossible layout, so this plays what Tessera's tests cannot: a
mig-parted config written by hand (as a bug in Tessera's placement code would write it) and
a node pointed at it. The simulator must answer like the real MIG manager — ``failed``, and
the device plugin keeps advertising what the node had — rather than copy Tessera's verdict.
(Before the simulators had their own table, they reported ``success`` for any config that
existed and silently left the node's allocatable as it was.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from devcluster import fleet, gpunode
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

from .helpers import eventually, namespace

pytestmark = pytest.mark.integration
NAMES = gpunode.Names(mig_name="sim-mig-manager-test")  # not the ConfigMap Tessera writes
NODE = "simmig-a100-0"
CONFIGS = {
    # 2x 3g.20gb cover all 8 slots of an A100-40GB; mig-parted's own known_configs.go would
    # accept the extra 1g, summing compute slices only (docs/facts/mig.md §Lists that sum slices)
    "three-g-twice-plus-one": {"3g.20gb": 2, "1g.5gb": 1},
    "four-g-two-of-them": {"4g.20gb": 2},
    "four-plus-three": {"4g.20gb": 1, "3g.20gb": 1},
}


@pytest.fixture(scope="module")
def node(kube: Kube) -> Iterator[str]:
    namespace(kube, NAMES.mig_namespace)
    configs = {
        name: [{"devices": "all", "mig-enabled": True, "mig-devices": layout}]
        for name, layout in CONFIGS.items()
    }
    text = yaml.safe_dump({"version": "v1", "mig-configs": configs})
    cm = {
        "metadata": {"name": NAMES.mig_name, "namespace": NAMES.mig_namespace},
        "data": {c.MIG_PARTED_CONFIGMAP_KEY: text},
    }
    kube.create(path_of("v1", "configmaps", namespace=NAMES.mig_namespace), cm)
    fleet.create_nodes(kube, [fleet.NodeSpec(NODE, "A100-40GB", devices=2)])
    agents = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.2, names=NAMES).start()
    try:
        yield NODE
    finally:
        agents.stop()
        for path in (
            path_of("v1", "nodes", NODE),
            path_of("v1", "configmaps", NAMES.mig_name, NAMES.mig_namespace),
        ):
            try:
                kube.delete(path)
            except ApiError as err:
                if not err.not_found:
                    raise


def _select(kube: Kube, node: str, config: str) -> tuple[str, dict[str, Any]]:
    """Point the node at ``config`` and wait for the MIG manager's verdict on it."""
    kube.patch(path_of("v1", "nodes", node), {"metadata": {"labels": {c.MIG_CONFIG_LABEL: config}}})

    def verdict() -> tuple[str, dict[str, Any]] | None:
        obj = kube.get(path_of("v1", "nodes", node))
        meta = obj["metadata"]
        state = meta["labels"].get(c.MIG_CONFIG_STATE_LABEL)
        done = meta.get("annotations", {}).get(gpunode.APPLIED_MIG) == config
        return (state, obj) if done and state in ("success", "failed") else None

    return eventually(verdict, timeout=30, what=f"the MIG manager's verdict on {config}")


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ("three-g-twice-plus-one", "do not fit side by side on the 8 slots of A100-40GB"),
        ("four-g-two-of-them", "2x 4g.20gb: at most 1 per GPU on A100-40GB"),
    ],
)
def test_an_impossible_layout_fails_and_the_node_keeps_its_devices(
    kube: Kube, node: str, config: str, why: str
) -> None:
    state, obj = _select(kube, node, config)
    assert state == "failed"
    assert why in obj["metadata"]["annotations"]["sim.tessera.io/mig-error"]
    allocatable = obj["status"]["allocatable"]
    assert not [k for k in allocatable if k.startswith("nvidia.com/mig-")]


def test_a_layout_the_table_places_succeeds_and_is_advertised(kube: Kube, node: str) -> None:
    state, _ = _select(kube, node, "four-plus-three")
    assert state == "success"

    def advertised() -> dict[str, str] | None:
        alloc = kube.get(path_of("v1", "nodes", node))["status"]["allocatable"]
        mig = {k: v for k, v in alloc.items() if k.startswith("nvidia.com/")}
        return (
            mig if mig == {"nvidia.com/mig-4g.20gb": "2", "nvidia.com/mig-3g.20gb": "2"} else None
        )

    eventually(advertised, timeout=30, what="2 GPUs of 4g.20gb + 3g.20gb advertised")
