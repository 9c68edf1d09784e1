"""``cluster.demand``: Nodes, Pods and the pool's observation in, the suggestion's inputs out.

Raw objects as the API server returns them go through ``cluster.observe_pool`` (the
controller's own reading) and ``cluster.demand.observe``; the decision is the demand file's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from live_builders import DENSER, NOW, POOL
from live_builders import config as _config
from live_builders import node as _node
from live_builders import pod as _pod
from live_builders import spec as _spec

from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.autopilot import suggestion
from tessera.domain.autopilot.bounds import Bounds
from tessera.domain.cluster import demand, objects


def _observe(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    spec: NodePoolGeometrySpec | None = None,
) -> demand.Observed:
    spec = spec or _spec()
    configs = dict([_config(spec), _config(DENSER)])
    seen = objects.observe_pool(POOL, spec, nodes, {}, None, configs)
    return demand.observe(POOL, spec, seen, pods, NOW, Bounds())


def _two(held0: dict[str, list[int]] | None = None, **kw: Any) -> list[dict[str, Any]]:
    config, _ = _config(_spec())
    return [
        _node("n-0", config=config, held=held0 if held0 is not None else {}, **kw),
        _node("n-1", config=config, held={}, **kw),
    ]


def test_unschedulable_pods_for_a_profile_are_the_demand_and_named() -> None:
    pods = [_pod(f"p{i}") for i in range(14)]
    seen = _observe(_two(), pods)
    assert seen.inputs.pods == (suggestion.demand.Pending("1g.10gb", 14, timedelta(minutes=10)),)
    assert seen.unknown == ()
    assert seen.waiting == {"1g.10gb": tuple(sorted(f"ml/p{i}" for i in range(14)))}
    result = suggestion.suggest(seen.inputs)
    assert result.patch is not None
    assert result.lines[0].startswith("14 pods want 1g.10gb for 10 min; GPU 0 is idle on each")
    assert demand.lines(seen)[0] == (
        "pending for 1g.10gb: "
        + ", ".join(sorted(f"ml/p{i}" for i in range(14))[:10])
        + " and 4 more"
    )


def test_a_gpu_the_record_places_a_pod_on_is_busy_and_never_in_the_patch() -> None:
    running = [_pod(f"r{i}", "nvidia.com/gpu", node="n-0") for i in range(3)]
    held = {f"ml/r{i}": [i] for i in range(3)}
    seen = _observe(_two(held), [*running, *(_pod(f"p{i}") for i in range(20))])
    by_index = {g.index: g.used for g in seen.inputs.gpus}
    assert [i for i, used in by_index.items() if used] == [0, 1, 2]
    result = suggestion.suggest(seen.inputs)
    assert result.patch is not None
    changed = {lay["devices"] for lay in result.patch["spec"]["mig"]["layouts"][1:]}
    assert changed == {"3", "4"}  # 10 a node: 7 + 3 on the first idle GPUs; 0-2 hold pods


@pytest.mark.parametrize(
    "nodes, why",
    [
        pytest.param(
            lambda cfg: [_node("n-0", config=cfg)],
            "no tessera.io/gpu-holders record",
            id="no-record",
        ),
        pytest.param(
            lambda cfg: [_node("n-0", config=_config(DENSER)[0], held={})],
            "does not run the pool's layout yet",
            id="not-at-the-spec",
        ),
        pytest.param(
            lambda cfg: [_node("n-0", config="", held={})],
            "the layout it runs now is not known",
            id="layout-unknown",
        ),
        pytest.param(
            lambda cfg: [_node("n-0", config=cfg, held={}, read=NOW - timedelta(hours=2))],
            "was created after the GPU holders were read",
            id="stale-record",
        ),
    ],
)
def test_unknown_usage_counts_every_gpu_busy_and_says_why(nodes: Any, why: str) -> None:
    config, _ = _config(_spec())
    running = _pod("r0", "nvidia.com/gpu", node="n-0")
    seen = _observe(nodes(config), [running, _pod("p0")])
    assert len(seen.unknown) == 1 and seen.unknown[0].startswith("n-0: ")
    assert why in seen.unknown[0]
    assert all(g.used for g in seen.inputs.gpus)
    result = suggestion.suggest(seen.inputs)
    assert result.patch is None and result.decision.nothing_fits
    assert "all 8 GPUs hold pods" in result.lines[0]
    assert demand.lines(seen)[-1].endswith("its GPUs count as busy")


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(_pod("gated", reason="SchedulingGated"), id="not-marked-unschedulable"),
        pytest.param(_pod("elsewhere", selector={"tessera.io/pool": "a100"}), id="another-pool"),
        pytest.param(_pod("cpu", "cpu"), id="no-mig-resource"),
        pytest.param(_pod("whole", "nvidia.com/gpu"), id="whole-gpu-names-no-profile"),
    ],
)
def test_pods_that_are_not_the_pools_demand_are_left_out(pod: dict[str, Any]) -> None:
    seen = _observe(_two(), [pod])
    assert seen.inputs.pods == () and seen.waiting == {}
    assert suggestion.suggest(seen.inputs).patch is None


def test_a_pod_asking_for_two_instances_counts_twice() -> None:
    seen = _observe(_two(), [_pod("two", n=2, selector={"tessera.io/pool": POOL})])
    assert [(w.profile, w.pods) for w in seen.inputs.pods] == [("1g.10gb", 2)]


def test_pods_below_the_threshold_are_kept_apart_and_do_not_count() -> None:
    pods = [_pod("old", pended=timedelta(minutes=9)), _pod("old2", pended=timedelta(minutes=6))]
    pods.append(_pod("new", pended=timedelta(minutes=1)))
    seen = _observe(_two(), pods)
    assert [(w.pods, w.pended) for w in seen.inputs.pods] == [
        (2, timedelta(minutes=9)),
        (1, timedelta(minutes=1)),
    ]
    assert seen.inputs.wants[0].pods == 1  # 2 pods on 2 nodes: one instance at an index
    result = suggestion.suggest(seen.inputs)
    assert result.lines[0].startswith("2 pods want 1g.10gb for 9 min")


@pytest.mark.parametrize(
    "nodes, pods, spec, message",
    [
        pytest.param(
            None,
            [_pod("odd", "nvidia.com/mig-1g.12gb")],
            None,
            "pod ml/odd asks for nvidia.com/mig-1g.12gb, which names no MIG profile of H100-80GB",
            id="unknown-profile",
        ),
        pytest.param(
            None,
            [_pod("when", pended=None)],
            None,
            "pod ml/when: its PodScheduled condition has no readable lastTransitionTime",
            id="no-time",
        ),
        pytest.param(
            [],
            [_pod("p0")],
            None,
            "NodePoolGeometry/h100: selects no node",
            id="no-member",
        ),
        pytest.param(
            None,
            [],
            _spec(migStrategy="single"),
            "migStrategy single",
            id="single-strategy",
        ),
    ],
)
def test_a_demand_it_cannot_read_is_an_error_naming_the_object(
    nodes: list[dict[str, Any]] | None,
    pods: list[dict[str, Any]],
    spec: NodePoolGeometrySpec | None,
    message: str,
) -> None:
    with pytest.raises(demand.LiveError, match=message.replace("(", r"\(")):
        _observe(_two() if nodes is None else nodes, pods, spec)


def test_members_unlike_each_other_are_an_error() -> None:
    config, _ = _config(_spec())
    nodes = [_node("n-0", config=config, held={}), _node("n-1", config=config, held={}, gpus=4)]
    with pytest.raises(demand.LiveError, match="its nodes differ"):
        _observe(nodes, [])


def test_a_terminating_pod_still_holds_its_gpu() -> None:
    leaving = _pod("r0", "nvidia.com/gpu", node="n-0")
    leaving["metadata"]["deletionTimestamp"] = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    seen = _observe(_two({"ml/r0": [0]}), [leaving, _pod("p0")])
    assert seen.inputs.gpus[0].used == (("gpu", 1),)
    result = suggestion.suggest(seen.inputs)
    assert result.patch is not None
    assert [lay["devices"] for lay in result.patch["spec"]["mig"]["layouts"][1:]] == ["1"]
