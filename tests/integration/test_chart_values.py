"""The Helm chart's values a platform team reaches for first, and docs/install.md's install command.

A ServiceMonitor needs the Prometheus Operator: the chart renders one only where the cluster
serves its API (Helm's capabilities: discovery on install, ``--api-versions`` offline) or when
forced, and otherwise stops with a message naming the value. ``operator.env`` / ``envFrom``
reach the operator's container, checked by the real API server. An empty
``vnpuAgent.namespace`` stops the chart rather than put the privileged agent in the release
namespace.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import yaml

from tessera.adapters.kube import Kube

from .conftest import ROOT, Kubectl
from .helpers import namespace
from .tools import CHART, SERVICE_MONITOR_API, helm, helm_template

INSTALL_DOC = ROOT / "docs" / "install.md"


def docs(manifest: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(manifest) if d]


def kinds(manifest: str) -> list[str]:
    return sorted(d["kind"] for d in docs(manifest))


def readme_helm_block() -> list[str]:
    """The commands of the first ``sh`` block under docs/install.md's "## Helm", one per line."""
    section = INSTALL_DOC.read_text().split("\n## Helm\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_a_service_monitor_renders_only_where_the_cluster_serves_its_api_or_when_forced() -> None:
    assert "ServiceMonitor" not in kinds(helm_template())
    refused = helm(
        "template", "tessera", str(CHART), "--set", "metrics.serviceMonitor.enabled=true"
    )
    assert refused.returncode != 0
    message = " ".join(refused.stderr.split())
    assert "metrics.serviceMonitor.enabled=true needs the Prometheus Operator" in message
    assert "does not serve monitoring.coreos.com/v1 ServiceMonitor" in message
    served = helm_template("metrics.serviceMonitor.enabled=true", extra=SERVICE_MONITOR_API)
    assert kinds(served).count("ServiceMonitor") == 1
    forced = helm_template(
        "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.force=true"
    )
    assert kinds(forced).count("ServiceMonitor") == 1


def test_the_readme_helm_install_works_without_the_prometheus_operator() -> None:
    install = next(shlex.split(c) for c in readme_helm_block() if c.startswith("helm install"))
    assert install[:4] == ["helm", "install", "tessera", "deploy/helm/tessera"]
    # `helm template` offline knows no ServiceMonitor API: the cluster of a user without the
    # Prometheus Operator.
    out = helm("template", "tessera", str(ROOT / install[3]), *install[4:])
    assert out.returncode == 0, out.stderr
    assert "ServiceMonitor" not in kinds(out.stdout)
    deployment = next(d for d in docs(out.stdout) if d["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].startswith(
        "REGISTRY/tessera:"
    )
    # docs/install.md's way to add the monitor works where the API is served.
    readme = " ".join(INSTALL_DOC.read_text().split())
    hint = "With the Prometheus Operator installed, add `--set metrics.serviceMonitor.enabled=true`"
    assert hint in readme
    extra = ("--set", "metrics.serviceMonitor.enabled=true", *SERVICE_MONITOR_API)
    served = helm("template", "tessera", str(ROOT / install[3]), *install[4:], *extra)
    assert served.returncode == 0, served.stderr
    assert kinds(served.stdout).count("ServiceMonitor") == 1


def test_operator_env_and_env_from_reach_the_operator_container(
    kube: Kube, kubectl: Kubectl
) -> None:
    env = [
        {"name": "OTEL_TRACES_EXPORTER", "value": "otlp"},
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector:4317"},
        {
            "name": "OTEL_SERVICE_NAME",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        },
    ]
    env_from = [{"secretRef": {"name": "tessera-otel", "optional": True}}]
    rendered = helm_template(
        extra=(
            "--set-json",
            f"operator.env={json.dumps(env)}",
            "--set-json",
            f"operator.envFrom={json.dumps(env_from)}",
        )
    )
    deployment = next(d for d in docs(rendered) if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    names = [e["name"] for e in container["env"]]
    assert names[:3] == ["POD_NAME", "POD_NAMESPACE", "PYTHONDONTWRITEBYTECODE"]
    assert container["env"][3:] == env
    assert container["envFrom"] == env_from
    # The real API server takes it as it is.
    namespace(kube, "tessera-system")
    out = kubectl.ok(
        "apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=yaml.dump(deployment)
    )
    applied = json.loads(out)["spec"]["template"]["spec"]["containers"][0]
    assert applied["env"][3:] == env and applied["envFrom"] == env_from
    # By default the container has the operator's own variables only.
    plain = next(d for d in docs(helm_template()) if d["kind"] == "Deployment")
    plain_container = plain["spec"]["template"]["spec"]["containers"][0]
    assert len(plain_container["env"]) == 3 and "envFrom" not in plain_container


def test_readme_documents_every_value_it_names() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    section = INSTALL_DOC.read_text().split("\n## Helm\n", 1)[1].split("\n## ", 1)[0]
    for dotted in sorted(
        set(re.findall(r"`(?:--set(?:-json)? '?)?((?:operator|metrics)\.[\w.]+)", section))
    ):
        node: Any = values
        for part in dotted.split("."):
            assert isinstance(node, dict) and part in node, (
                f"docs/install.md names {dotted}, not in values"
            )
            node = node[part]


def test_an_empty_agent_namespace_stops_the_chart_with_a_message_naming_the_value() -> None:
    """It defaulted to the release namespace, which Pod Security holds to restricted."""
    refused = helm("template", "tessera", str(CHART), "--set", "vnpuAgent.namespace=")
    assert refused.returncode != 0, refused.stdout
    message = " ".join(refused.stderr.split())
    assert "vnpuAgent.namespace is empty: the vNPU agent runs privileged" in message
    assert "set vnpuAgent.namespace, or vnpuAgent.enabled=false" in message
    assert "vnpuAgent.enabled=false and gpuAgent.enabled=false" in message  # both use it
    off = helm_template("vnpuAgent.namespace=", "vnpuAgent.enabled=false", "gpuAgent.enabled=false")
    assert "DaemonSet" not in kinds(off)
    assert {"tessera-agent"} == {
        d["metadata"].get("namespace") for d in docs(helm_template()) if d["kind"] == "DaemonSet"
    }
