"""Volcano MindCluster mode's pod contract, refused by the real API server (no webhook).

A platform engineer hands a 310P3 pool to Volcano's MindCluster dynamic vNPU with
``podContract: Deny``; Tessera writes the ValidatingAdmissionPolicy. A pod asking
``huawei.com/npu-core`` without ``vnpu-level``, or labelled for a 910 pool, is refused at
``kubectl apply`` time (a server-side dry run here: admission runs, nothing is stored) with the
message naming the label; the full contract is admitted. The API server loads a new admission
policy asynchronously, so the first check polls until the policy answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devcluster import fleet
from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import eventually, namespace
from .sharing_support import SP, delete_policy, policy

POOL = "mc-pool"
NAME = "mc-310p"
WORK = "mc-work"


@pytest.fixture(scope="module")
def mindcluster(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    namespace(kube, WORK)
    fleet.create_nodes(kube, fleet.pool(POOL, "Ascend310P3", 2, devices=2))
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: POOL}},
        "backend": "Exclusive",
        "ascend": {"mode": "MindCluster", "chip": "310P3"},
        "scheduler": {"name": "Volcano", "podContract": "Deny", "volcano": {}},
    }
    body = {"apiVersion": c.API_VERSION, "kind": "SharingPolicy", "metadata": {"name": NAME}}
    kube.create(SP, {**body, "spec": spec})
    yield
    if policy(kube, NAME) is not None:
        delete_policy(kube, NAME)


def _pod(name: str, **labels: str | None) -> Obj:
    pod_labels: dict[str, Any] = {"ring-controller.atlas": "ascend-310P", "vnpu-level": "low"}
    pod_labels.update(labels)
    limits = {"huawei.com/npu-core": "2"}
    container = {"name": "infer", "image": "infer:1", "resources": {"limits": limits}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {k: v for k, v in pod_labels.items() if v}},
        "spec": {"schedulerName": "volcano", "containers": [container]},
    }


def _refusal(kube: Kube, body: Obj) -> str | None:
    try:
        kube.create(path_of("v1", "pods", namespace=WORK) + "?dryRun=All", body)
    except ApiError as err:
        return err.message
    return None


def test_a_pod_breaking_the_mindcluster_contract_is_refused_naming_the_label(
    kube: Kube, mindcluster: None
) -> None:
    no_level = _pod("no-level", **{"vnpu-level": None})
    said = eventually(lambda: _refusal(kube, no_level), 90, "the contract to refuse the pod")
    assert "label vnpu-level is unset" in said and "low or high" in said
    on_910 = _refusal(kube, _pod("on-910", **{"ring-controller.atlas": "ascend-910b"}))
    assert on_910 is not None and "label ring-controller.atlas is 'ascend-910b'" in on_910
    assert "ascend-310P" in on_910
    assert _refusal(kube, _pod("fits")) is None  # the full contract is admitted
