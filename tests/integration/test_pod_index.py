"""The operator's pod index against the real API server: list, watch, group by node.

The pods are a Deployment's replicas, placed by kube-scheduler: the index must
group them where the API server says they are, and follow the scheduler, the
ReplicaSet controller and deletions through its watch.
"""

from __future__ import annotations

from builders import DeploymentWrapper
from devcluster import fleet
from tessera.adapters.kube import Kube, path_of
from tessera.controllers.runtime import pod_index
from tessera.domain.rollout import PodView

from .helpers import app_pods, eventually, namespace, serve

NS, POOL = "index", "idx"


def names(got: dict[str, list[PodView]] | None, node: str) -> set[str]:
    assert got is not None
    return {pod.name for pod in got[node]}


def bound(kube: Kube, nodes: list[str]) -> dict[str, set[str]]:
    """The pods of ``NS`` bound to each of ``nodes``, as the API server lists them."""
    out: dict[str, set[str]] = {node: set() for node in nodes}
    for pod in kube.list(path_of("v1", "pods", namespace=NS)):
        node = pod["spec"].get("nodeName")
        if node in out:
            out[node].add(pod["metadata"]["name"])
    return out


def test_bound_pods_are_grouped_by_node_and_follow_the_watch(kube: Kube) -> None:
    nodes = fleet.create_nodes(kube, fleet.pool(POOL, "H100-80GB", 2))
    namespace(kube, NS)
    placed = serve(kube, NS, "idx", pool=POOL, replicas=3)
    # A replica no node can take (its pool has none): Pending, never bound, never indexed.
    unbound = DeploymentWrapper("unbound").pool("none").limits({"nvidia.com/gpu": 1})
    kube.create(path_of("apps/v1", "deployments", namespace=NS), unbound.obj())
    eventually(lambda: app_pods(kube, NS, "unbound"), what="the unbound replica created")
    index = pod_index(kube)
    assert index.get(nodes[:1]) is None, "an index that has not listed yet must say so"
    index.start()
    try:
        assert index.wait_synced(30)
        got = index.get([*nodes, "idx-9"])
        assert {node: names(got, node) for node in nodes} == bound(kube, nodes)
        assert set().union(*(names(got, node) for node in nodes)) == {
            p["metadata"]["name"] for p in placed
        }
        assert names(got, "idx-9") == set()
        assert got is not None and all(p.requests_accelerator for n in nodes for p in got[n])

        scale = {"spec": {"replicas": 4}}  # one replica more, placed by the scheduler
        kube.patch(path_of("apps/v1", "deployments", "idx", NS), scale)
        gone = placed[0]["metadata"]["name"]  # the ReplicaSet replaces it
        kube.delete(path_of("v1", "pods", gone, NS), {"gracePeriodSeconds": 0})

        def followed() -> bool:
            want, now = bound(kube, nodes), index.get(nodes)
            have = {node: names(now, node) for node in nodes}
            listed = set().union(*want.values())
            return have == want and len(listed) == 4 and gone not in listed

        eventually(followed, what="the watch's creates (scheduled) and delete in the index")
    finally:
        index.stop()
