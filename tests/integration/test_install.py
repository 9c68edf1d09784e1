"""What a platform team installs, checked by the real API server.

Every kustomization under config/, the rendered deploy/tessera.yaml and the Helm chart's
output must pass ``kubectl apply --dry-run=server``: schema, admission and RBAC escalation
checks included (creating a ClusterRole needs every permission it grants). The operator the
session runs uses the token of config/rbac's ServiceAccount (conftest), so its permissions
are proven by the whole suite; here we also check /metrics on that very process.
"""

from __future__ import annotations

import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import custom
from tessera.adapters.kube import Kube
from tessera.observability import metrics

from .conftest import ROOT, Kubectl, OperatorProcess
from .helpers import eventually, namespace
from .tools import SERVICE_MONITOR_API, helm_template

CONFIG = ROOT / "config"
KUSTOMIZATIONS = sorted(p.parent.name for p in CONFIG.glob("*/kustomization.yaml"))


@pytest.fixture(scope="module")
def prerequisites(kubectl: Kubectl, kube: Kube) -> None:
    """What the manifests need to exist first: their CRDs (applied for real) and namespace."""
    kubectl.ok("apply", "--server-side", "-k", str(CONFIG / "crd"))
    kubectl.ok("apply", "--server-side", "-f", str(ROOT / "tests/data/crds/servicemonitor.yaml"))
    kubectl.ok("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    namespace(kube, "tessera-system")
    namespace(kube, "tessera-agent")


def kinds(manifest: str) -> list[tuple[str, str]]:
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs)


def dry_run(kubectl: Kubectl, manifest: str) -> str:
    return kubectl.ok("apply", "--dry-run=server", "-f", "-", stdin=manifest)


def test_config_covers_every_part() -> None:
    assert KUSTOMIZATIONS == [
        "agent", "crd", "default", "manager", "prometheus", "rbac", "samples"
    ]  # fmt: skip


@pytest.mark.parametrize("part", KUSTOMIZATIONS)
def test_every_kustomization_passes_server_dry_run(
    kubectl: Kubectl, prerequisites: None, part: str
) -> None:
    manifest = kubectl.ok("kustomize", str(CONFIG / part))
    out = dry_run(kubectl, manifest)
    assert len(re.findall(r"\(server dry run\)", out)) == len(kinds(manifest)), out


def test_the_rendered_install_is_config_default_and_passes_server_dry_run(
    kubectl: Kubectl, prerequisites: None
) -> None:
    rendered = (ROOT / "deploy" / "tessera.yaml").read_text()
    assert kinds(rendered) == kinds(kubectl.ok("kustomize", str(CONFIG / "default")))
    out = dry_run(kubectl, rendered)
    assert len(re.findall(r"\(server dry run\)", out)) == len(kinds(rendered)), out


def test_the_helm_chart_renders_the_same_objects_and_passes_server_dry_run(
    kubectl: Kubectl, prerequisites: None
) -> None:
    chart = helm_template("metrics.serviceMonitor.enabled=true", extra=SERVICE_MONITOR_API)
    install = kinds((ROOT / "deploy" / "tessera.yaml").read_text())
    # Helm installs into a namespace it is given and adds the monitor where its API is served;
    # it creates the agent's namespace, as config/agent does.
    expected = [k for k in install if k != ("Namespace", "tessera-system")]
    expected += [("ServiceMonitor", "tessera")]
    assert kinds(chart) == sorted(expected)
    out = dry_run(kubectl, chart)
    assert len(re.findall(r"\(server dry run\)", out)) == len(kinds(chart)), out


def _role(manifest: str, name_suffix: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    return next(
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith(name_suffix)
    )


def test_the_chart_grants_what_config_rbac_grants_and_follows_the_configmap_values(
    kubectl: Kubectl,
) -> None:
    rbac = kubectl.ok("kustomize", str(CONFIG / "rbac"))
    assert _role(helm_template(), "-manager")["rules"] == _role(rbac, "tessera-manager")["rules"]
    renamed = helm_template("configMaps.devicePlugin.name=dp", "configMaps.migParted.name=mig")
    names = [r.get("resourceNames") for r in _role(renamed, "-manager")["rules"]]
    assert [
        "dp",
        "mig",
        "tessera-vnpu-config",
        "tessera-vgpu-devices-config",
        "hami-device-plugin",
        "hami-device-node-config",
    ] in names
    deployment = next(d for d in yaml.safe_load_all(renamed) if d and d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "--device-plugin-configmap=gpu-operator/dp" in args
    assert "--mig-parted-configmap=gpu-operator/mig" in args
    assert "--vnpu-configmap=tessera-system/tessera-vnpu-config" in args
    assert "--vgpu-configmap=gpu-operator/tessera-vgpu-devices-config" in args


def _docs(manifest: str, kind: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(manifest) if d and d["kind"] == kind]


def test_the_chart_grants_the_agent_what_config_rbac_grants_and_keeps_it_to_its_node(
    kubectl: Kubectl,
) -> None:
    rbac = kubectl.ok("kustomize", str(CONFIG / "rbac"))
    chart = helm_template()
    assert _role(chart, "-agent")["rules"] == _role(rbac, "tessera-agent")["rules"]
    [shipped], [rendered] = (
        _docs(rbac, "ValidatingAdmissionPolicy"),
        _docs(chart, "ValidatingAdmissionPolicy"),
    )
    assert rendered["spec"] == shipped["spec"]
    [binding] = _docs(chart, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == rendered["metadata"]["name"]
    # The agent runs in a namespace of its own, the only one that allows privileged pods.
    agent_ns = {d["metadata"]["namespace"] for d in _docs(chart, "DaemonSet")}
    assert agent_ns == {"tessera-agent"}
    labels = {d["metadata"]["name"]: d["metadata"]["labels"] for d in _docs(chart, "Namespace")}
    assert labels["tessera-agent"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_the_running_operator_serves_its_metrics(kube: Kube, operator: OperatorProcess) -> None:
    kube.create(
        "/apis/tessera.io/v1alpha1/tenantquotas",
        custom(
            "TenantQuota",
            "metrics-probe",
            {
                "namespaceSelector": {"matchLabels": {"tessera.io/tenant": "metrics-probe"}},
                "hard": {"nvidia.com/gpu": 1},
            },
        ),
    )
    pattern = re.compile(
        r'^tessera_reconciles_total\{kind="TenantQuota",outcome="ready"\} (\S+)$', re.M
    )

    def reconciled() -> float | None:
        try:
            text = operator.scrape()
        except urllib.error.URLError:  # the process is still starting
            return None
        match = pattern.search(text)
        return float(match.group(1)) if match else None

    assert eventually(reconciled, 30, "a ready TenantQuota reconcile counted") >= 1
    text = operator.scrape()
    # the status the reconcile wrote, counted by the callback `tessera run` gives the client
    writes = re.search(r'^tessera_api_writes_total\{verb="patch"\} (\S+)$', text, re.M)
    assert writes is not None and float(writes.group(1)) >= 1
    for info in metrics.catalog():
        assert f"# TYPE {info.name} {info.type}\n" in text, f"{info.name} is not exported"


def test_the_session_operator_runs_as_the_config_rbac_service_account(
    operator: OperatorProcess,
) -> None:
    text = Path(operator.kubeconfig).read_text()
    assert "name: tessera\n" in text and "tessera-admin-token" not in text


def test_operator_log_lines_name_the_object_the_action_and_its_reason(
    kube: Kube, operator: OperatorProcess
) -> None:
    namespace(kube, "logfmt-probe", {"tessera.io/tenant": "logfmt-probe"})
    spec = {
        "namespaceSelector": {"matchLabels": {"tessera.io/tenant": "logfmt-probe"}},
        "hard": {"nvidia.com/gpu": 2},
    }
    kube.create(
        "/apis/tessera.io/v1alpha1/tenantquotas", custom("TenantQuota", "logfmt-probe", spec)
    )
    line = re.compile(
        r'^ts=\S+ level=info logger=tessera\.tenantquota msg="[^"]+" '
        r'object=TenantQuota/logfmt-probe action="create ResourceQuota" '
        r'namespace=logfmt-probe reason="[^"]+"$',
        re.M,
    )
    assert eventually(lambda: line.search(operator.log()), 30, "a logfmt action line")


def test_each_replica_derives_a_distinct_peering_priority_from_its_pod_name(
    kubectl: Kubectl,
) -> None:
    docs = yaml.safe_load_all(kubectl.ok("kustomize", str(CONFIG / "manager")))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"]
    script = container["args"][0].replace("exec tessera run", "echo", 1)
    priorities = set()
    for pod in ("tessera-operator-7d9f8c6b5-abcde", "tessera-operator-7d9f8c6b5-fghij"):
        out = subprocess.run(
            ["/bin/sh", "-c", script],
            env={"POD_NAME": pod, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "--peering=tessera" in out
        match = re.search(r"--priority=(\d+)", out)
        assert match, out
        priorities.add(int(match.group(1)))
    assert len(priorities) == 2


def test_argo_cd_syncs_every_install_object_before_the_custom_resources(kubectl: Kubectl) -> None:
    docs = [
        d
        for d in yaml.safe_load_all(kubectl.ok("kustomize", str(ROOT / "deploy/argocd/install")))
        if d
    ]
    waves = {
        (d["kind"], d["metadata"]["name"]): d["metadata"]
        .get("annotations", {})
        .get("argocd.argoproj.io/sync-wave")
        for d in docs
    }
    install = kinds(kubectl.ok("kustomize", str(CONFIG / "default")))
    late = {obj: waves[obj] for obj in install if waves[obj] not in ("-2", "-1")}
    assert late == {}, "the install must be synced (and pruned) around the custom resources"
    assert {w for (kind, _), w in waves.items() if kind in {"NodePoolGeometry", "TenantQuota"}} == {
        "0"
    }


def test_the_agent_policy_follows_the_agent_namespace_the_chart_is_given() -> None:
    """A policy naming another ServiceAccount than the agent's would match nothing: the agent
    would be free to change every Node. Moved to another namespace, everything follows."""
    chart = helm_template("vnpuAgent.namespace=npu-agents")
    [policy] = _docs(chart, "ValidatingAdmissionPolicy")
    [condition] = policy["spec"]["matchConditions"]
    assert condition["expression"] == (
        "request.userInfo.username == 'system:serviceaccount:npu-agents:tessera-agent'"
    )
    agent_accounts = [
        d for d in _docs(chart, "ServiceAccount") if d["metadata"]["name"] == "tessera-agent"
    ]
    assert [d["metadata"]["namespace"] for d in agent_accounts] == ["npu-agents"]
    daemonsets = _docs(chart, "DaemonSet")  # the vNPU agent's and the GPU agent's
    assert sorted(d["metadata"]["name"] for d in daemonsets) == [
        "tessera-gpu-agent",
        "tessera-vnpu-agent",
    ]
    for ds in daemonsets:
        assert ds["metadata"]["namespace"] == "npu-agents"
        assert ds["spec"]["template"]["spec"]["serviceAccountName"] == "tessera-agent"
    subjects = [
        s
        for kind in ("ClusterRoleBinding", "RoleBinding")
        for d in _docs(chart, kind)
        if d["metadata"]["name"].endswith("-agent")
        for s in d["subjects"]
    ]
    assert subjects and all(
        (s["name"], s["namespace"]) == ("tessera-agent", "npu-agents") for s in subjects
    )
