"""The API as users meet it: CRDs, samples, rejected input, kubectl get and explain."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tessera.adapters.kube import Kube

from .conftest import ROOT, Kubectl
from .dra_support import samples_dra_pool_removed

SAMPLES = sorted((ROOT / "config" / "samples").glob("*_*.yaml"))
INVALID = sorted((ROOT / "tests" / "data" / "invalid").glob("*.yaml"))
__all__ = ["samples_dra_pool_removed"]  # the samples' DRA pool deleted after the module


def test_crds_are_established_and_structural(kube: Kube) -> None:
    crds = kube.list("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    ours = {c["metadata"]["name"]: c for c in crds if c["spec"]["group"] == "tessera.io"}
    assert set(ours) == {
        "nodepoolgeometries.tessera.io",
        "sharingpolicies.tessera.io",
        "tenantquotas.tessera.io",
    }
    for crd in ours.values():
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True"
        assert conditions.get("NonStructuralSchema", "False") == "False"


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_every_sample_applies(kubectl: Kubectl, sample: Path) -> None:
    kubectl.ok("apply", "--dry-run=server", "-f", str(sample))


def test_invalid_corpus_is_large_enough() -> None:
    assert len(INVALID) >= 20


@pytest.mark.parametrize("manifest", INVALID, ids=lambda p: p.stem)
def test_invalid_manifest_is_rejected_with_its_message(kubectl: Kubectl, manifest: Path) -> None:
    text = manifest.read_text()
    match = re.match(r"# expect: (.+)\n", text)
    assert match, f"{manifest.name} must start with '# expect: <message>'"
    result = kubectl("apply", "--dry-run=server", "-f", str(manifest))
    assert result.returncode != 0, f"{manifest.name} was accepted"
    assert match.group(1) in result.stderr


@pytest.mark.usefixtures("samples_dra_pool_removed")
def test_kubectl_get_shows_printer_columns(kubectl: Kubectl) -> None:
    kubectl.ok("apply", "-k", str(ROOT / "config" / "samples"))
    sp = kubectl.ok("get", "sharingpolicies")
    assert re.search(r"NAME\s+BACKEND\s+NODES\s+APPLIED\s+READY\s+REASON\s+AGE", sp)
    assert re.search(r"h100-timeslice\s+TimeSlicing", sp)
    both = kubectl.ok("get", "npg,tq")
    assert re.search(r"NAME\s+UPDATED\s+TOTAL\s+READY\s+REASON\s+AGE", both)
    assert re.search(r"NAME\s+NAMESPACES\s+OVERCOMMITTED\s+READY\s+REASON\s+AGE", both)
    everything = kubectl.ok("get", "tessera", "-o", "name")
    names = set(everything.split())
    assert "nodepoolgeometry.tessera.io/h100-inference" in names
    assert "sharingpolicy.tessera.io/notebooks-mps" in names
    assert "tenantquota.tessera.io/team-a" in names
    wide = kubectl.ok("get", "sp", "-o", "wide")
    assert re.search(r"CONFIG\s+MESSAGE", wide)


@pytest.mark.parametrize(
    ("field", "words"),
    [
        ("npg.spec.rollout.maxUnavailable", "disrupted at once"),
        ("sp.spec.mps.replicas", "MPS clients per GPU"),
        ("tq.spec.total", "never sum past it"),
        ("npg.spec.mig.layouts.devices", "ranges"),
    ],
)
def test_kubectl_explain_shows_descriptions(kubectl: Kubectl, field: str, words: str) -> None:
    assert words in kubectl.ok("explain", field)


def test_samples_parse_with_the_api_models() -> None:
    from tessera.api.v1alpha1 import KINDS

    by_kind = {k.kind: k for k in KINDS}
    for sample in SAMPLES:
        doc = yaml.safe_load(sample.read_text())
        by_kind[doc["kind"]].spec.model_validate(doc["spec"])
