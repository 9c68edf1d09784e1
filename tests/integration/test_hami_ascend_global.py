"""HAMi's Ascend device plugin (simulated) reads the global ``vnpus.hamiVnpuCore`` of
``hami-scheduler-device`` and lets the node's ``hami-device-node-config`` entry override it.

A platform engineer runs HAMi ≥ v2.9 (``vnpus: {hamiVnpuCore, configs}``) on two 310P3 nodes
labelled ``ascend=on``. With the chart's ``hamiVnpuCore: false`` both nodes register template
slots (7 per card) and say ``hami-vnpu-core: "false"``. Turning the global default on (what
Tessera's scheduler sync writes when a policy turns soft slicing on) switches every node without
an entry of its own; a SharingPolicy with ``softSlicing: false`` on one node writes that node's
entry, which wins over the global default. Back on HAMi ≤ v2.8's list form there is no global
default: soft slicing is off unless a node's entry turns it on. A map without the node's chip
leaves the plugin with nothing to register, and says so on the node.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from devcluster import fleet, hami_ascend, schedulers
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import eventually
from .sharing_support import SP, delete_policy, node, wait_ready

pytestmark = pytest.mark.integration
NPU = "huawei.com/Ascend310P"
REGISTER = c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX + "Ascend310P"
DEVICE_MAP = path_of("v1", "configmaps", schedulers.HAMI_CONFIGMAP, schedulers.HAMI_NAMESPACE)
POOL = "asc-global"


@pytest.fixture(scope="module", autouse=True)
def plugin(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    schedulers.install_hami(kube)
    sim = hami_ascend.HamiAscendPlugin(kube).start()
    yield
    sim.stop()
    schedulers.uninstall(kube)


def seen(kube: Kube, name: str) -> tuple[str, int, set[int]]:
    """(``hami-vnpu-core``, allocatable NPUs, the cards' ``devcore``) as the plugin wrote them."""
    obj = node(kube, name)
    notes = obj["metadata"].get("annotations") or {}
    cards = json.loads(notes.get(REGISTER, "[]"))
    alloc = int(obj["status"]["allocatable"].get(NPU, "0"))
    return notes.get(c.HAMI_VNPU_CORE_ANNOTATION, ""), alloc, {card["devcore"] for card in cards}


def set_vnpus(kube: Kube, edit: object) -> None:
    doc = yaml.safe_load(kube.get(DEVICE_MAP)["data"][c.HAMI_SCHEDULER_CONFIGMAP_KEY])
    doc["vnpus"] = edit(doc["vnpus"])  # type: ignore[operator]
    kube.patch(DEVICE_MAP, {"data": {c.HAMI_SCHEDULER_CONFIGMAP_KEY: yaml.safe_dump(doc)}})


TEMPLATES, SOFT = ("false", 14, {8}), ("true", 14, {100})  # 2 cards x 7 slots; devcore


def test_the_global_default_and_the_node_override(kube: Kube) -> None:
    on = {c.HAMI_ASCEND_NODE_LABEL: c.HAMI_ASCEND_NODE_VALUE}
    specs = [fleet.NodeSpec(f"{POOL}-{i}", "Ascend310P3", 2, pool=POOL, labels=on) for i in (0, 1)]
    a, b = fleet.create_nodes(kube, specs)
    both = lambda want: lambda: [seen(kube, a), seen(kube, b)] == list(want)  # noqa: E731
    eventually(both([TEMPLATES, TEMPLATES]), 30, "the chart's hamiVnpuCore: false")

    set_vnpus(kube, lambda v: {**v, "hamiVnpuCore": True})
    eventually(both([SOFT, SOFT]), 30, "the global soft-slicing default on both nodes")

    body = {
        "apiVersion": "tessera.io/v1alpha1",
        "kind": "SharingPolicy",
        "metadata": {"name": POOL},
        "spec": {
            "nodeSelector": {"matchLabels": {"kubernetes.io/hostname": b}},
            "backend": "Exclusive",
            "ascend": {"softSlicing": False},
        },
    }
    kube.create(SP, body)
    try:
        eventually(both([SOFT, TEMPLATES]), 60, "the node entry's hami-vnpu-core: false wins")
        wait_ready(kube, POOL, 90)

        set_vnpus(kube, lambda v: v["configs"])  # HAMi <= v2.8: the list, no global default
        eventually(both([TEMPLATES, TEMPLATES]), 30, "no global default in the list form")

        set_vnpus(kube, lambda v: [])  # no 310P3 entry: ADP finds no config for the chip
        error = lambda: (node(kube, a)["metadata"].get("annotations") or {}).get(  # noqa: E731
            hami_ascend.ERROR_ANNOTATION
        )
        assert "chipName 310P3" in eventually(error, 30, "the plugin's error on the node")
    finally:
        delete_policy(kube, POOL)
