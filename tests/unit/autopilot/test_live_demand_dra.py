"""``cluster.demand`` on a DRA pool (issue 29 item 1, "DRA claims for its DeviceClasses"):
the demand is in the ResourceClaims of the pods that pend, the usage in the claims
allocated, read against the node's ResourceSlices (``cluster.dra_view``, as ``tessera plan``
reads them, ``cluster.demand.observe_dra``); the decision is the device-plugin pool's.

One 8-GPU H100 node of a DRA pool at whole GPUs; ``ml/busy-<i>`` holds GPU i through its
allocated claim; pods pend, kube-scheduler marked them Unschedulable, with claims that
kube-scheduler could not allocate.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from live_builders import NOW, POOL
from live_builders import config as _config
from live_builders import node as _node
from live_builders import pod as _pod
from live_builders import spec as _spec

from builders.dra import ResourceSliceWrapper, allocated_claim, board_gpu
from tessera.domain.autopilot import suggestion
from tessera.domain.autopilot.bounds import Bounds
from tessera.domain.cluster import demand, objects

SPEC = _spec(allocation="DRA")
Raw = dict[str, Any]


def _claim(name: str, *requests: Raw) -> Raw:
    """A claim kube-scheduler has not allocated (its pod pends)."""
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": list(requests)}},
    }


def _exactly(cls: str, count: int = 1, mode: str = "ExactCount") -> Raw:
    return {
        "name": "r",
        "exactly": {"deviceClassName": cls, "count": count, "allocationMode": mode},
    }


def _wanting(claim: str) -> Raw:
    pod = _pod(f"want-{claim}", "cpu")
    pod["metadata"]["uid"] = f"want-{claim}"
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return pod


def _busy(i: int) -> Raw:
    pod = _pod(f"busy-{i}", "cpu", node="n-0")
    pod["metadata"]["uid"] = f"busy-{i}"
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"held-{i}"}]
    return pod


def _observe(pending: list[Raw], claims: list[Raw], busy: int = 3) -> demand.Observed:
    name, text = _config(SPEC)
    raw_nodes = [_node("n-0", config=name)]
    seen = objects.observe_pool(POOL, SPEC, raw_nodes, {}, None, {name: text})
    held = [allocated_claim(f"held-{i}", "n-0", [f"gpu-{i}"], [f"busy-{i}"]) for i in range(busy)]
    published = ResourceSliceWrapper("n-0").obj()
    published["spec"]["devices"] = [board_gpu(i) for i in range(8)]
    pods = [*map(_busy, range(busy)), *pending]
    every = [*held, *claims]
    return demand.observe_dra(POOL, SPEC, seen, pods, every, [published], NOW, Bounds())


def test_claims_that_pend_for_a_profiles_class_are_the_demand_and_the_busy_gpus_stay() -> None:
    claims = [_claim(f"c{i}", _exactly("mig-1g.10gb.tessera.io")) for i in range(6)]
    claims.append(_claim("c6", _exactly("team.mig-1g.10gb.sharing.tessera.io")))
    seen = _observe([_wanting(c["metadata"]["name"]) for c in claims], claims)
    assert seen.inputs.pods == (suggestion.demand.Pending("1g.10gb", 7, timedelta(minutes=10)),)
    assert seen.unknown == ()  # the claims say who holds which GPU
    used = {g.index: dict(g.used) for g in seen.inputs.gpus if g.used}
    assert used == {i: {"gpu": 1} for i in range(3)}
    result = suggestion.suggest(seen.inputs)
    assert result.patch is not None, result.lines
    assert result.lines[0].startswith("7 pods want 1g.10gb for 10 min; GPU 3 is idle")
    assert seen.waiting["1g.10gb"][0] == "ml/want-c0"


@pytest.mark.parametrize(
    ("requests", "counted"),
    [
        pytest.param([_exactly("mig-3g.40gb.tessera.io", 2)], {"3g.40gb": 2}, id="a count of 2"),
        pytest.param([_exactly("gpu.tessera.io")], {}, id="a whole GPU: not MIG demand"),
        pytest.param([_exactly("gpu.example.com")], {}, id="another driver's class"),
        pytest.param(
            [_exactly("mig-1g.10gb.tessera.io"), _exactly("mig-2g.20gb.tessera.io")],
            {"1g.10gb": 1, "2g.20gb": 1},
            id="two requests",
        ),
    ],
)
def test_what_a_pending_claim_counts(requests: list[Raw], counted: dict[str, int]) -> None:
    seen = _observe([_wanting("c")], [_claim("c", *requests)])
    assert {w.profile: w.pods for w in seen.inputs.pods} == counted


def test_an_allocated_claim_of_a_pending_pod_is_no_demand() -> None:
    claim = allocated_claim("c", "n-0", ["gpu-5"], [])
    seen = _observe([_wanting("c")], [claim])
    assert seen.inputs.pods == ()


@pytest.mark.parametrize(
    ("claims", "error"),
    [
        pytest.param(
            [],
            "pod ml/want-c: its ResourceClaim ml/c was not read, so what it asks for is not known",
            id="a claim not read",
        ),
        pytest.param(
            [_claim("c", _exactly("mig-1g.10gb.tessera.io", mode="All"))],
            "pod ml/want-c: its ResourceClaim ml/c: spec.devices.requests[0]: allocationMode All",
            id="all devices: no count",
        ),
        pytest.param(
            [
                _claim(
                    "c",
                    {
                        "name": "r",
                        "firstAvailable": [
                            {"name": "a", "deviceClassName": "mig-1g.10gb.tessera.io"},
                            {"name": "b", "deviceClassName": "mig-2g.20gb.tessera.io"},
                        ],
                    },
                )
            ],
            "spec.devices.requests[0].firstAvailable: one of mig-1g.10gb.tessera.io, "
            "mig-2g.20gb.tessera.io; which profile is wanted is not known",
            id="alternatives: no one profile",
        ),
        pytest.param(
            [_claim("c", _exactly("mig-1g.5gb.tessera.io"))],
            "pod ml/want-c asks for mig-1g.5gb.tessera.io, which names no MIG profile of H100-80GB",
            id="a profile the model lacks",
        ),
    ],
)
def test_a_claim_whose_demand_cannot_be_read_is_an_error_naming_it(
    claims: list[Raw], error: str
) -> None:
    with pytest.raises(demand.LiveError, match=re.escape(error)):
        _observe([_wanting("c")], claims)


def test_without_the_claims_a_dra_pool_is_an_error_not_no_changes() -> None:
    name, text = _config(SPEC)
    seen = objects.observe_pool(POOL, SPEC, [_node("n-0", config=name)], {}, None, {name: text})
    with pytest.raises(demand.LiveError, match="demand is in its ResourceClaims: none were read"):
        demand.observe(POOL, SPEC, seen, [], NOW, Bounds())
