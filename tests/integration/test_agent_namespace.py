"""The privileged vNPU agent has a namespace of its own, so the operator's enforces ``restricted``.

For the kustomize install and the Helm chart, the agent's DaemonSet is created as shipped in a
namespace labelled like the agent's and in one labelled like the operator's; the real DaemonSet
controller creates its Pod, which the real PodSecurity admission admits in the first (the pod
runs on the test's Ascend node) and refuses in the second (the controller's FailedCreate Event
names the policy).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from devcluster import fleet
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import ROOT, Kubectl
from .helpers import eventually, namespace
from .test_pod_security import PSA, helm_install, kustomize_install

POOL = "agent-ns"


@pytest.fixture(scope="module")
def ascend_node(kube: Kube) -> str:
    """The Ascend node the DaemonSets run on (theirs is narrowed to this pool)."""
    (name,) = fleet.create_nodes(kube, [fleet.NodeSpec(f"{POOL}-npu", "Ascend310P3", 2, pool=POOL)])
    return name


def parts(install: str, kubectl: Kubectl) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """(the operator namespace's labels, the agent namespace's labels, the agent DaemonSet)."""
    if install == "kustomize":
        operator_labels, _ = kustomize_install(kubectl)
        rendered = kubectl.ok("kustomize", str(ROOT / "config" / "agent"))
        docs = [d for d in yaml.safe_load_all(rendered) if d]
    else:
        operator_labels, docs = helm_install(kubectl)
    ds = next(
        d
        for d in docs
        if d["kind"] == "DaemonSet"
        and d["metadata"]["labels"]["app.kubernetes.io/component"] == "vnpu-agent"
    )
    ns = next(
        d
        for d in docs
        if d["kind"] == "Namespace" and d["metadata"]["name"] == ds["metadata"]["namespace"]
    )
    return operator_labels, ns["metadata"]["labels"], ds


def in_namespace(ds: dict[str, Any], ns: str) -> dict[str, Any]:
    """The shipped DaemonSet in ``ns``, its node affinity narrowed to this test's pool so that
    it runs no pod on the other tests' Ascend nodes (admission is about the pod's security
    context, which stays as shipped)."""
    copy = json.loads(json.dumps(ds))
    copy["metadata"]["namespace"] = ns
    affinity = copy["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    for term in terms:
        term["matchExpressions"].append({"key": c.POOL_LABEL, "operator": "In", "values": [POOL]})
    return copy


def refusals(kube: Kube, ns: str) -> list[str]:
    """The DaemonSet controller's FailedCreate Events in ``ns``."""
    found = kube.list(path_of("v1", "events", namespace=ns))
    return [e["message"] for e in found if e.get("reason") == "FailedCreate"]


@pytest.mark.parametrize("install", ["kustomize", "helm"])
def test_the_agent_is_admitted_in_its_own_namespace_and_refused_in_the_operators(
    kube: Kube, kubectl: Kubectl, scratch: list[str], ascend_node: str, install: str
) -> None:
    operator_labels, agent_labels, ds = parts(install, kubectl)
    assert ds["metadata"]["namespace"] == "tessera-agent"
    assert agent_labels[f"{PSA}enforce"] == "privileged"
    own, operators = f"agent-{install}", f"agent-in-operator-ns-{install}"
    for ns, labels in ((own, agent_labels), (operators, operator_labels)):
        namespace(kube, ns, {k: v for k, v in labels.items() if k.startswith(PSA)})
        scratch.append(ns)
        kubectl.ok("create", "serviceaccount", "tessera-agent", "-n", ns)

    admitted = kubectl("create", "-f", "-", stdin=json.dumps(in_namespace(ds, own)))
    assert admitted.returncode == 0, admitted.stderr
    assert "Warning" not in admitted.stderr, admitted.stderr
    name = ds["metadata"]["name"]

    def running() -> list[dict[str, Any]]:
        pods = kube.list(path_of("v1", "pods", namespace=own))
        return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]

    (pod,) = eventually(running, 60, f"the DaemonSet controller's agent pod Running in {own}")
    assert pod["spec"]["nodeName"] == ascend_node
    assert pod["metadata"]["ownerReferences"][0]["name"] == name

    warned = kubectl("create", "-f", "-", stdin=json.dumps(in_namespace(ds, operators)))
    assert warned.returncode == 0, warned.stderr  # a DaemonSet is admitted; its pods are not
    assert 'would violate PodSecurity "restricted:latest"' in warned.stderr, warned.stderr
    refused = eventually(
        lambda: refusals(kube, operators), 60, f"the DaemonSet controller refused in {operators}"
    )
    assert 'violates PodSecurity "restricted:latest"' in refused[0], refused
    assert "privileged" in refused[0], refused
    assert kube.list(path_of("v1", "pods", namespace=operators)) == []
