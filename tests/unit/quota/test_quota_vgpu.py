"""TenantQuota over vGPU resources: the sandbox device plugin's names (``nvidia.com/NVIDIA_<type>``,
``nvidia.com/GRID_<type>`` on older drivers) are extended resources like any other."""

from __future__ import annotations

import pytest
from quota_builders import members, spec

from tessera.api.v1alpha1 import rules as manifest_rules
from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec
from tessera.domain.geometry import vgpu
from tessera.domain.quota import names
from tessera.domain.quota.planning import plan

VGPU = vgpu.resource("A100D-20C")  # nvidia.com/NVIDIA_A100D-20C
GRID = vgpu.resource("A100D-20C", vgpu.OLDER)


@pytest.mark.parametrize("resource", [VGPU, GRID, vgpu.resource("A100-1-5CME")])
def test_vgpu_resource_names_pass_the_api_rules_and_are_quota_keys(resource: str) -> None:
    raw = {"namespaceSelector": {}, "hard": {resource: 2}, "total": {resource: 3}}
    assert manifest_rules.first_broken("TenantQuota", raw) is None  # the CEL/pattern twins
    assert TenantQuotaSpec.model_validate(raw).hard == {resource: 2}
    assert names.quota_key(resource) == f"requests.{resource}"
    assert names.resource_of(f"requests.{resource}") == resource


def test_a_tenant_total_of_vgpus_is_split_over_its_namespaces() -> None:
    got = plan("team-a", spec({VGPU: 4}, {VGPU: 6}), members("team-a", "a", "b"), [])
    assert got.targets == {"a": {VGPU: 3}, "b": {VGPU: 3}}
    assert all(
        a.manifest is not None and a.manifest["spec"]["hard"] == {f"requests.{VGPU}": "0"}
        for a in got.wave1
    )
