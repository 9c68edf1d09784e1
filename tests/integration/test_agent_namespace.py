"""The privileged vNPU agent has a namespace of its own, so the operator's enforces ``restricted``.

For the kustomize install and the Helm chart, the agent's Pod — built from its DaemonSet's
template, as the DaemonSet controller would — is admitted by the real PodSecurity admission in a
namespace labelled like the agent's, and refused in one labelled like the operator's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tessera.adapters.kube import Kube

from .conftest import ROOT, Kubectl
from .helpers import namespace
from .test_pod_security import PSA, helm_install, kustomize_install, pod_from


def parts(install: str, kubectl: Kubectl) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """(the operator namespace's labels, the agent namespace's labels, the agent DaemonSet)."""
    if install == "kustomize":
        operator_labels, _ = kustomize_install(kubectl)
        rendered = kubectl.ok("kustomize", str(ROOT / "config" / "agent"))
        docs = [d for d in yaml.safe_load_all(rendered) if d]
    else:
        operator_labels, docs = helm_install(kubectl)
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    ns = next(
        d
        for d in docs
        if d["kind"] == "Namespace" and d["metadata"]["name"] == ds["metadata"]["namespace"]
    )
    return operator_labels, ns["metadata"]["labels"], ds


@pytest.mark.parametrize("install", ["kustomize", "helm"])
def test_the_agent_is_admitted_in_its_own_namespace_and_refused_in_the_operators(
    kube: Kube, kubectl: Kubectl, scratch: list[str], install: str
) -> None:
    operator_labels, agent_labels, ds = parts(install, kubectl)
    assert ds["metadata"]["namespace"] == "tessera-agent"
    assert agent_labels[f"{PSA}enforce"] == "privileged"
    own, operators = f"agent-{install}", f"agent-in-operator-ns-{install}"
    for ns, labels in ((own, agent_labels), (operators, operator_labels)):
        namespace(kube, ns, {k: v for k, v in labels.items() if k.startswith(PSA)})
        scratch.append(ns)
        kubectl.ok("create", "serviceaccount", "tessera-agent", "-n", ns)

    admitted = kubectl("create", "-f", "-", stdin=json.dumps(pod_from(ds, "agent", own)))
    assert admitted.returncode == 0, admitted.stderr
    assert "Warning" not in admitted.stderr, admitted.stderr
    refused = kubectl("create", "-f", "-", stdin=json.dumps(pod_from(ds, "agent", operators)))
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr, refused.stderr
    assert "privileged" in refused.stderr, refused.stderr
