"""``tessera plan --prune --prune-tracking-id APP``: prune what Argo CD 3.x tracks by annotation."""

from __future__ import annotations

from typing import Any

import pytest
from preview_builders import T0, tenant_quota, world

from tessera.cli.main import main
from tessera.domain import preview
from tessera.domain.preview import tracking

ID = "argocd.argoproj.io/tracking-id"


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("gpu:tessera.io/TenantQuota:/team-a", ("gpu", "tessera.io", "TenantQuota", "", "team-a")),
        ("gpu:tessera.io/TenantQuota:argocd/team-a", ("gpu", "tessera.io", "TenantQuota", "argocd", "team-a")),
        ("apps_gpu:/ConfigMap:ml/cm", ("apps_gpu", "", "ConfigMap", "ml", "cm")),
        ("gpu", None),
        ("gpu:tessera.io/TenantQuota", None),
        ("gpu:TenantQuota:/team-a", None),
        (":tessera.io/TenantQuota:/team-a", None),
        ("gpu:tessera.io/TenantQuota:team-a", None),
        ("gpu:tessera.io/TenantQuota:/", None),
    ],
)  # fmt: skip
def test_tracking_ids_parse_as_argo_cd_writes_them(
    value: str, parsed: tuple[str, ...] | None
) -> None:
    found = tracking.parse(value)
    assert (found and (found.app, found.group, found.kind, found.namespace, found.name)) == parsed


def _tracked(obj: dict[str, Any], value: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "annotations": {ID: value}}}


@pytest.mark.parametrize(
    ("app", "expected"),
    [
        ("gpu-platform", ["TenantQuota/ours", "TenantQuota/ours-elsewhere"]),
        ("research", ["TenantQuota/theirs"]),
        ("nobody", []),
    ],
)
def test_a_tracking_id_narrows_what_prune_deletes(app: str, expected: list[str]) -> None:
    ours = _tracked(tenant_quota("ours", "a"), "gpu-platform:tessera.io/TenantQuota:/ours")
    # Argo CD writes the destination namespace into a cluster-scoped object's id
    elsewhere = _tracked(
        tenant_quota("ours-elsewhere", "d"),
        "gpu-platform:tessera.io/TenantQuota:argocd/ours-elsewhere",
    )
    theirs = _tracked(tenant_quota("theirs", "b"), "research:tessera.io/TenantQuota:/theirs")
    mine = tenant_quota("mine", "c")  # created by hand, outside any application
    # an id copied from another object does not make this one tracked
    copied = _tracked(tenant_quota("copied", "e"), "gpu-platform:tessera.io/TenantQuota:/ours")
    other_kind = _tracked(
        tenant_quota("kind", "f"), "gpu-platform:tessera.io/NodePoolGeometry:/kind"
    )
    items = (ours, elsewhere, theirs, mine, copied, other_kind)
    result = preview.preview(world(*items), [], T0, prune=True, prune_tracking_id=app)
    assert preview.as_json(result)["deleted"] == expected


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--prune-tracking-id", "gpu"], "--prune-tracking-id narrows --prune; give --prune too"),
        (["--prune", "--prune-tracking-id", "gpu:x"], "is not an Argo CD application name"),
        (
            ["--prune", "--prune-tracking-id", ""],
            "'' is not an Argo CD application name",
        ),  # $APP unset
    ],
)
def test_the_cli_refuses_a_tracking_id_it_cannot_use(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "-f", "-", *args]) == 1
    assert says in capsys.readouterr().err
