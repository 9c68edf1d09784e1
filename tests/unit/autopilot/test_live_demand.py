"""``cluster.demand``: Nodes, Pods and the pool's observation in, the suggestion's inputs out.

Raw objects as the API server returns them go through ``cluster.observe_pool`` (the
controller's own reading) and ``cluster.demand.observe``; the decision is the demand file's.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.autopilot import suggestion
from tessera.domain.autopilot.bounds import Bounds
from tessera.domain.cluster import demand, objects

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
POOL = "h100"
WHOLE = {"nodeSelector": {"matchLabels": {"tessera.io/pool": POOL}}}


def _spec(**over: Any) -> NodePoolGeometrySpec:
    body: dict[str, Any] = {**WHOLE, "mig": {"layouts": [{"devices": "all", "profiles": {}}]}}
    body.update(over)
    return NodePoolGeometrySpec.model_validate(body)


DENSER = _spec(mig={"layouts": [{"devices": "all", "profiles": {"1g.10gb": 7}}]})


def _config(spec: NodePoolGeometrySpec) -> tuple[str, Any]:
    seen = objects.observe_pool(POOL, spec, [_node("probe", config="")], {})
    (target,) = seen.targets.values()
    assert target.config is not None
    return target.config


def _node(
    name: str,
    *,
    config: str,
    gpus: int = 8,
    held: dict[str, list[int]] | None = None,
    read: datetime = NOW - timedelta(seconds=30),
    product: str = "NVIDIA-H100-80GB-HBM3",
    pool: str = POOL,
) -> dict[str, Any]:
    labels = {
        "tessera.io/pool": pool,
        c.GPU_PRODUCT_LABEL: product,
        c.GPU_COUNT_LABEL: str(gpus),
    }
    if config:
        labels |= {c.MIG_CONFIG_LABEL: config, c.MIG_CONFIG_STATE_LABEL: "success"}
    annotations = {}
    if held is not None:
        record = {"v": 1, "read": read.strftime("%Y-%m-%dT%H:%M:%SZ"), "pods": held}
        annotations[c.GPU_HOLDERS_ANNOTATION] = json.dumps(record)
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {}},
    }


def _pod(
    name: str,
    resource: str = "nvidia.com/mig-1g.10gb",
    n: int = 1,
    *,
    node: str = "",
    pended: timedelta | None = timedelta(minutes=10),
    reason: str = "Unschedulable",
    selector: dict[str, str] | None = None,
    created: datetime = NOW - timedelta(hours=1),
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if not node:
        cond: dict[str, Any] = {"type": "PodScheduled", "status": "False", "reason": reason}
        if pended is not None:
            cond["lastTransitionTime"] = (NOW - pended).strftime("%Y-%m-%dT%H:%M:%SZ")
        status["conditions"] = [cond]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {resource: str(n)}}}],
        "nodeSelector": selector or {},
    }
    if node:
        spec["nodeName"] = node
    meta = {
        "namespace": "ml",
        "name": name,
        "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"metadata": meta, "spec": spec, "status": status}


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
