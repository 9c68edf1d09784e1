"""The operator's namespace enforces Pod Security ``restricted``, and its replicas survive drains.

The real API server runs PodSecurity admission. For the kustomize install (config/manager) and
the Helm chart, a namespace gets the labels the install documents (namespace.yaml, README's
``kubectl label``), and each replica's Pod, built from the Deployment's template as the
ReplicaSet controller would, is created for real: admitted without a warning, while a copy that
allows privilege escalation is refused — the namespace has teeth. The install's
PodDisruptionBudget and topology spread must select exactly those pods.
"""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

import pytest
import yaml

from tessera.adapters.kube import Kube

from .conftest import ROOT, Kubectl
from .helpers import namespace
from .test_chart_values import readme_helm_block
from .tools import helm_template

PSA = "pod-security.kubernetes.io/"
RESTRICTED = {f"{PSA}{mode}": "restricted" for mode in ("enforce", "audit", "warn")}


def kustomize_install(kubectl: Kubectl) -> tuple[dict[str, str], list[dict[str, Any]]]:
    docs = [
        d for d in yaml.safe_load_all(kubectl.ok("kustomize", str(ROOT / "config/manager"))) if d
    ]
    ns = next(d for d in docs if d["kind"] == "Namespace")
    return ns["metadata"]["labels"], docs


def helm_install(kubectl: Kubectl) -> tuple[dict[str, str], list[dict[str, Any]]]:
    commands = [shlex.split(c) for c in readme_helm_block()]
    label = next((c for c in commands if c[:2] == ["kubectl", "label"]), None)
    assert label, f"README's Helm install does not label the namespace: {commands}"
    assert label[:4] == ["kubectl", "label", "namespace", "tessera-system"], label
    labels = dict(arg.split("=", 1) for arg in label[4:])
    return labels, [d for d in yaml.safe_load_all(helm_template()) if d]


INSTALLS = {"kustomize": kustomize_install, "helm": helm_install}


def pod_from(deployment: dict[str, Any], name: str, ns: str) -> dict[str, Any]:
    template = copy.deepcopy(deployment["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }


def selected(kubectl: Kubectl, ns: str, selector: dict[str, Any]) -> list[str]:
    labels = ",".join(f"{k}={v}" for k, v in selector["matchLabels"].items())
    out = kubectl.ok("get", "pods", "-n", ns, "-l", labels, "-o", "json")
    return sorted(p["metadata"]["name"] for p in json.loads(out)["items"])


@pytest.mark.parametrize("install", INSTALLS)
def test_operator_pods_are_admitted_where_restricted_is_enforced_and_a_pdb_covers_them(
    kube: Kube, kubectl: Kubectl, scratch: list[str], install: str
) -> None:
    labels, docs = INSTALLS[install](kubectl)
    assert {k: v for k, v in labels.items() if k.startswith(PSA)} == RESTRICTED
    ns = f"psa-{install}"
    namespace(kube, ns, labels)
    scratch.append(ns)
    kubectl.ok("create", "serviceaccount", "tessera", "-n", ns)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    replicas = deployment["spec"]["replicas"]
    assert replicas == 2
    names = [f"operator-{i}" for i in range(replicas)]
    for name in names:
        created = kubectl("create", "-f", "-", stdin=json.dumps(pod_from(deployment, name, ns)))
        assert created.returncode == 0, created.stderr
        assert "Warning" not in created.stderr, created.stderr

    loose = pod_from(deployment, "operator-escalating", ns)
    del loose["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"]
    refused = kubectl("create", "-f", "-", stdin=json.dumps(loose))
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest": allowPrivilegeEscalation' in refused.stderr

    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert [p["spec"].get("maxUnavailable") for p in pdbs] == [1]
    pdb = pdbs[0]
    pdb["metadata"]["namespace"] = ns
    kubectl.ok("create", "-f", "-", stdin=json.dumps(pdb))
    assert selected(kubectl, ns, pdb["spec"]["selector"]) == names

    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert [(c["topologyKey"], c["whenUnsatisfiable"], c["maxSkew"]) for c in spread] == [
        ("kubernetes.io/hostname", "ScheduleAnyway", 1)
    ]
    assert selected(kubectl, ns, spread[0]["labelSelector"]) == names


def test_a_single_helm_replica_gets_no_pdb_that_would_block_every_drain() -> None:
    one = [d for d in yaml.safe_load_all(helm_template("operator.replicas=1")) if d]
    assert "PodDisruptionBudget" not in {d["kind"] for d in one}
    off = [
        d
        for d in yaml.safe_load_all(helm_template("operator.podDisruptionBudget.enabled=false"))
        if d
    ]
    assert "PodDisruptionBudget" not in {d["kind"] for d in off}
