"""What one SharingPolicy renders to, checked, before any node is looked at.

A policy yields at most one device-plugin config (under its content-hashed
key), or HAMi ``nodeconfig`` fields, plus Ascend fields when ``ascend`` is
set. A policy on a pool with ``allocation: DRA`` yields none of them: its nodes
run NVIDIA's DRA driver, and its sharing goes into DeviceClasses instead. Errors found here hold every node of the policy; errors that depend on a
node (``node_errors``, filled in by planning) hold only that node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tessera.api.v1alpha1.backends import block_of
from tessera.api.v1alpha1.sharingpolicy import AscendSharing
from tessera.domain.base.rules import RuleError
from tessera.domain.schedulers.hami import nodes as hami
from tessera.domain.sharing import device_plugin
from tessera.domain.sharing.assignment import Policy
from tessera.domain.sharing.device_plugin import DevicePluginConfig


@dataclass(frozen=True)
class PolicyResult:
    name: str
    backend: str
    config: DevicePluginConfig | None = None
    key: str | None = None
    content: str | None = None
    hami_fields: Mapping[str, Any] | None = None
    ascend_fields: Mapping[str, Any] | None = None
    errors: tuple[RuleError, ...] = ()
    node_errors: tuple[RuleError, ...] = ()
    notices: tuple[str, ...] = ()
    ascend: AscendSharing | None = None  # spec.ascend: its mode is checked on each node's chip

    @property
    def valid(self) -> bool:
        return not self.errors


def result_of(policy: Policy, mps_root: str = device_plugin.MPS_ROOT) -> PolicyResult:
    return replace(_result_of(policy, mps_root), ascend=policy.spec.ascend)


def _result_of(policy: Policy, mps_root: str) -> PolicyResult:
    spec = policy.spec
    if policy.dra_pool:  # the pool decides the path: DeviceClasses, no key, no label, no HAMi
        return PolicyResult(policy.name, spec.backend)
    if spec.dra is not None and spec.pool_ref is not None and policy.pool_selector is not None:
        pool = spec.pool_ref.name
        why = RuleError(
            "spec.dra",
            f"pool {pool} has allocation: DevicePlugin, and spec.dra is for a pool with "
            f"allocation: DRA (set spec.{block_of(spec.backend)} instead, or allocation: DRA on "
            f"NodePoolGeometry {pool})",
        )
        return PolicyResult(policy.name, spec.backend, errors=(why,))
    ascend = (
        hami.ascend_fields(spec.ascend) if spec.ascend is not None and spec.ascend.hami else None
    )
    if spec.backend == "HAMiCore":
        if spec.hami_core is None:
            missing = RuleError("spec.hamiCore", "must be set when backend is HAMiCore")
            return PolicyResult(policy.name, spec.backend, errors=(missing,))
        notices = (hami.MPS_NOTICE,) if spec.hami_core.mode == "MPS" else ()
        fields = hami.nvidia_fields(spec.hami_core)
        return PolicyResult(
            policy.name, spec.backend, hami_fields=fields, ascend_fields=ascend, notices=notices
        )
    config = device_plugin.from_spec(spec, mps_root)
    if config is None:
        block = "spec.mps" if spec.backend == "MPS" else "spec.timeSlicing"
        missing = RuleError(block, f"must be set when backend is {spec.backend}")
        return PolicyResult(policy.name, spec.backend, errors=(missing,))
    errors = device_plugin.validate(config)
    if errors:
        return PolicyResult(policy.name, spec.backend, config, errors=errors)
    content = device_plugin.render(config)
    key = device_plugin.config_key(policy.name, content)
    return PolicyResult(policy.name, spec.backend, config, key, content, ascend_fields=ascend)
