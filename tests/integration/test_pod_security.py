"""The operator's namespace enforces Pod Security ``restricted``, and its replicas survive drains.

The real API server runs PodSecurity admission. For the kustomize install (config/manager) and
the Helm chart, a namespace gets the labels the install documents (namespace.yaml, docs/install.md's
``kubectl label``), and the install's Deployment is created there for real: applied without a
warning, its ReplicaSet creates every replica, while a copy that allows privilege escalation is
warned about and its ReplicaSet's pods are refused (FailedCreate) — the namespace has teeth. The
install's PodDisruptionBudget and topology spread must select exactly the replicas.
"""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

import pytest
import yaml

from tessera.adapters.kube import Kube, path_of

from .conftest import ROOT, Kubectl
from .helpers import condition, eventually, namespace
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
    assert label, f"docs/install.md's Helm install does not label the namespace: {commands}"
    assert label[:4] == ["kubectl", "label", "namespace", "tessera-system"], label
    labels = dict(arg.split("=", 1) for arg in label[4:])
    return labels, [d for d in yaml.safe_load_all(helm_template()) if d]


INSTALLS = {"kustomize": kustomize_install, "helm": helm_install}


def in_namespace(deployment: dict[str, Any], ns: str, name: str = "") -> dict[str, Any]:
    copied = copy.deepcopy(deployment)
    copied["metadata"] |= {"namespace": ns, **({"name": name} if name else {})}
    return copied


def replica_failure(kube: Kube, ns: str, selector: dict[str, Any]) -> str | None:
    """The message of a ReplicaSet of ``selector`` that failed to create its pods."""
    labels = ",".join(f"{k}={v}" for k, v in selector["matchLabels"].items())
    for rs in kube.list(path_of("apps/v1", "replicasets", namespace=ns), label_selector=labels):
        failure = condition(rs, "ReplicaFailure") or {}
        if failure.get("reason") == "FailedCreate":
            return str(failure.get("message"))
    return None


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
    created = kubectl("create", "-f", "-", stdin=json.dumps(in_namespace(deployment, ns)))
    assert created.returncode == 0, created.stderr
    assert "Warning" not in created.stderr, created.stderr  # PodSecurity checks the template
    selector = deployment["spec"]["selector"]

    # The ReplicaSet controller creates the replicas: PodSecurity admission lets each one in.
    def all_created() -> list[str] | None:
        got = selected(kubectl, ns, selector)
        return got if len(got) == replicas else None

    names = eventually(all_created, 60, f"{replicas} replicas created by the ReplicaSet")

    # A copy that allows privilege escalation: warned at apply, its pods refused at admission,
    # which its ReplicaSet reports (what `kubectl describe` shows the person who applied it).
    loose = in_namespace(deployment, ns, "operator-escalating")
    for labels in (
        loose["spec"]["selector"]["matchLabels"],
        loose["spec"]["template"]["metadata"]["labels"],
    ):
        labels["variant"] = "escalating"
    del loose["spec"]["template"]["spec"]["containers"][0]["securityContext"][
        "allowPrivilegeEscalation"
    ]
    warned = kubectl("create", "-f", "-", stdin=json.dumps(loose))
    assert warned.returncode == 0, warned.stderr
    assert (
        'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation' in warned.stderr
    )
    refused = eventually(
        lambda: replica_failure(kube, ns, loose["spec"]["selector"]), 60, "FailedCreate"
    )
    assert 'violates PodSecurity "restricted:latest": allowPrivilegeEscalation' in refused
    assert selected(kubectl, ns, loose["spec"]["selector"]) == []

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
