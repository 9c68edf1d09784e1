"""``tessera plan`` fed what CI pipelines produce by accident, against the real control plane:
an empty stdin (a ``helm template`` that failed upstream), a ``kubectl get -o yaml`` List, a
manifest only the CRD's CEL rules refuse, plan's flags given to ``plan snapshot``. Each was a
green answer (exit 0, or 2 for a change the API server then refuses); each is now either the
true plan or exit 1 naming what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import TenantQuotaWrapper
from tessera.adapters.kube import Kube

from .conftest import ROOT, Kubectl
from .test_plan_gitops import tessera_plan

TQ = "/apis/tessera.io/v1alpha1/tenantquotas"


def _tenant(name: str, gpus: int) -> dict[str, Any]:
    return TenantQuotaWrapper(name).namespaces(tenant=name).hard({"nvidia.com/gpu": gpus}).obj()


def test_an_empty_stdin_is_an_error_not_no_changes(control_plane: Any) -> None:
    """``helm template ... | tessera plan -f -`` where helm failed: nothing came through."""
    for text in ("", "# rendered by a broken pipeline\n"):
        code, out, err = tessera_plan(
            "-f", "-", f"--kubeconfig={control_plane.kubeconfig}", stdin=text
        )
        assert (code, out) == (1, "")
        assert "tessera plan: -: no object to apply" in err


def test_a_file_whose_every_object_is_skipped_is_an_error_with_a_did_you_mean(
    control_plane: Any, tmp_path: Path
) -> None:
    """``kind: Nodepoolgeometry`` and no apiVersion: skipped, then "No changes", exit 0."""
    typo = tmp_path / "pool.yaml"
    typo.write_text("kind: Nodepoolgeometry\nmetadata: {name: h100}\nspec: {}\n")
    code, out, err = tessera_plan("-f", str(typo), f"--kubeconfig={control_plane.kubeconfig}")
    assert (code, out) == (1, ""), (out, err)
    assert "no Tessera object in the input, nothing to plan" in err, err
    assert "did you mean NodePoolGeometry, apiVersion tessera.io/v1alpha1?" in err, err
    assert "No changes" not in err


def test_a_list_from_kubectl_get_is_planned_item_by_item(
    kube: Kube, kubectl: Kubectl, control_plane: Any, tmp_path: Path
) -> None:
    """Export the live tenants, edit one, plan the file: the edit is a change (it was skipped
    as "not a Tessera object" with exit 0)."""
    kube.create(TQ, _tenant("lst-a", 1))
    listed = yaml.safe_load(
        kubectl.ok("get", "tq", "lst-a", "-o", "yaml", "--show-managed-fields=false")
    )
    listed = {"apiVersion": "v1", "kind": "List", "items": [listed]}  # as `get tq a b -o yaml`
    exported = tmp_path / "tenants.yaml"
    exported.write_text(yaml.safe_dump(listed))
    code, out, err = tessera_plan("-f", str(exported), f"--kubeconfig={control_plane.kubeconfig}")
    assert (code, err) == (0, "") and "No changes" in out
    listed["items"][0]["spec"]["hard"]["nvidia.com/gpu"] = 3
    exported.write_text(yaml.safe_dump(listed))
    code, out, err = tessera_plan("-f", str(exported), f"--kubeconfig={control_plane.kubeconfig}")
    assert code == 2, out + err
    assert "TenantQuota/lst-a: update" in out


@pytest.mark.parametrize(
    "name",
    ["sp-neither-selector-nor-poolref", "npg-max-unavailable-150pct", "tq-unqualified-resource"],
)
def test_what_only_cel_refuses_the_plan_refuses_with_the_api_servers_words(
    kubectl: Kubectl, control_plane: Any, name: str
) -> None:
    manifest = ROOT / "tests" / "data" / "invalid" / f"{name}.yaml"
    refused = kubectl("apply", "--dry-run=server", "-f", str(manifest))
    expected = manifest.read_text().splitlines()[0].removeprefix("# expect: ")
    assert refused.returncode != 0 and expected in refused.stderr
    code, out, err = tessera_plan("-f", str(manifest), f"--kubeconfig={control_plane.kubeconfig}")
    assert (code, out) == (1, "")
    assert f"{manifest}:2: " in err and expected in err


def test_plan_flags_given_to_snapshot_are_refused(control_plane: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "t.yaml"
    manifest.write_text(yaml.safe_dump(_tenant("snap-flags", 1)))
    code, out, err = tessera_plan(
        "-f", str(manifest), "snapshot", f"--kubeconfig={control_plane.kubeconfig}"
    )
    assert (code, out) == (1, "")
    assert "-f belong to tessera plan" in err
