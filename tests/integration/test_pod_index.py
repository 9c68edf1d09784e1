"""The operator's pod index against the real API server: list, watch, group by node."""

from __future__ import annotations

from devcluster import fleet
from tessera.adapters.kube import Kube, path_of
from tessera.controllers.runtime import pod_index
from tessera.domain.rollout import PodView

from .helpers import eventually, gpu_pod, namespace

NS = "index"


def names(got: dict[str, list[PodView]] | None, node: str) -> set[str]:
    assert got is not None
    return {pod.name for pod in got[node]}


def test_bound_pods_are_grouped_by_node_and_follow_the_watch(kube: Kube) -> None:
    fleet.create_nodes(kube, fleet.pool("idx", "H100-80GB", 2))
    namespace(kube, NS)
    pods = path_of("v1", "pods", namespace=NS)
    for name, node in (("a", "idx-0"), ("b", "idx-0"), ("c", "idx-1"), ("unbound", "")):
        kube.create(pods, gpu_pod(name, node=node))
    index = pod_index(kube)
    assert index.get(["idx-0"]) is None, "an index that has not listed yet must say so"
    index.start()
    try:
        assert index.wait_synced(30)
        got = index.get(["idx-0", "idx-1", "idx-9"])
        assert names(got, "idx-0") == {"a", "b"} and names(got, "idx-1") == {"c"}
        assert names(got, "idx-9") == set()
        assert got is not None and all(p.requests_accelerator for p in got["idx-0"])

        kube.create(pods, gpu_pod("d", node="idx-1"))
        kube.delete(path_of("v1", "pods", "a", NS), {"gracePeriodSeconds": 0})
        eventually(
            lambda: (
                names(index.get(["idx-0", "idx-1"]), "idx-1") == {"c", "d"}
                and names(index.get(["idx-0"]), "idx-0") == {"b"}
            ),
            what="the watch's create and delete in the index",
        )
    finally:
        index.stop()
