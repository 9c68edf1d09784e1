"""The pod index keeps one copy of what the pods of one template have in common."""

from __future__ import annotations

import json
from typing import Any

from tessera.adapters.sharing import Shared
from tessera.controllers.runtime import slim
from tessera.domain.cluster.objects import pod_view


def _pod(i: int, **labels: str) -> dict[str, Any]:
    toleration = {"key": "node.kubernetes.io/not-ready", "operator": "Exists"}
    return json.loads(  # decoded as the watch decodes it: no string shared by accident
        json.dumps(
            {
                "metadata": {"name": f"serve-{i}", "namespace": "ns", "uid": f"u{i}",
                             "labels": {"app": "serve", **labels}},
                "spec": {"nodeName": "gpu-1", "tolerations": [toleration],
                         "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
                "status": {"phase": "Running"},
            }
        )
    )  # fmt: skip


def test_a_slim_view_equals_the_view_and_shares_what_pods_have_in_common() -> None:
    shared = Shared()
    one, two = (slim(pod_view(_pod(i)), shared) for i in (1, 2))
    assert one == pod_view(_pod(1)) and two == pod_view(_pod(2))
    assert one.labels is two.labels and one.tolerations is two.tolerations
    assert one.requests is two.requests and one.namespace is two.namespace


def test_the_tables_are_bounded_and_what_was_shared_stays_right() -> None:
    shared = Shared(limit=2)
    views = [slim(pod_view(_pod(i, pod=f"p{i}")), shared) for i in range(5)]  # labels of its own
    assert [dict(v.labels) for v in views] == [{"app": "serve", "pod": f"p{i}"} for i in range(5)]
    assert len(shared._maps) <= 2
