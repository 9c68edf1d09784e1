"""HAMi's NVIDIA capacity in a SharingPolicy's status is what the nodes advertise, not a guess."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from sharing_builders import gpu_node, policy

from tessera.domain.sharing import planning, status
from tessera.domain.sharing.nodes import NodeFacts

GPU = "nvidia.com/gpu"


def settled(hami: dict[str, object], *alloc: int) -> tuple[planning.SharingPlan, list[NodeFacts]]:
    """Two 4-GPU nodes already running ``hami`` (a second pass after the writes), advertising
    ``alloc`` each."""
    found = [gpu_node(f"g{i}", gpus=4) for i in range(len(alloc))]
    p = policy("h", "HAMiCore", hamiCore=hami)
    first = planning.plan(
        [p], planning.SharingObserved(tuple(found)), cleared=frozenset(["g0", "g1"])
    )
    seen = planning.SharingObserved(
        tuple(found), hami_nvidia=first.hami_nvidia.document,
        hami_nvidia_managed=dict(first.hami_nvidia.managed),
    )  # fmt: skip
    nodes = [replace(n, allocatable={GPU: a}) for n, a in zip(found, alloc, strict=True)]
    return planning.plan([p], replace(seen, nodes=tuple(nodes))), nodes


@pytest.mark.parametrize(
    ("hami", "alloc", "state", "total", "applied"),
    [
        pytest.param({"deviceSplitCount": 3}, (12, 12), "ready", "24", 2, id="registered"),
        pytest.param({"deviceSplitCount": 3}, (12, 4), "progressing", "16", 1, id="one-behind"),
        pytest.param({"deviceSplitCount": 3}, (40, 40), "progressing", "80", 0, id="old-split"),
        pytest.param({"mode": "MIG"}, (7, 0), "ready", "7", 2, id="mig-observed-unchecked"),
    ],
)
def test_status_counts_what_the_nodes_advertise(
    hami: dict[str, object], alloc: tuple[int, ...], state: str, total: str, applied: int
) -> None:
    plan, nodes = settled(hami, *alloc)
    got = status.summarize(plan, "h", nodes)
    assert dict(got.advertised) == {GPU: total}
    assert (got.verdict.state, got.applied) == (state, applied)
    if state == "progressing":
        assert "HAMi's device plugin" in got.verdict.message
        assert "deviceSplitCount 3" in got.verdict.message


def test_the_gpus_hamis_plugin_registered_count_not_gfds() -> None:
    """A person's ``filterdevices`` makes HAMi register 3 of 4 GPUs: 3 x 3 slots is right."""
    plan, nodes = settled({"deviceSplitCount": 3}, 9, 12)
    three = json.dumps([{"id": f"GPU-{i}", "count": 3} for i in range(3)])
    nodes[0] = replace(nodes[0], annotations={"hami.io/node-nvidia-register": three})
    got = status.summarize(plan, "h", nodes)
    assert (got.verdict.state, dict(got.advertised)) == ("ready", {GPU: "21"})
    nodes[1] = replace(nodes[1], annotations={"hami.io/node-nvidia-register": "not json"})
    assert status.summarize(plan, "h", nodes).verdict.state == "ready"  # GFD's 4 GPUs then
