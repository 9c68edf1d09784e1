"""Device-plugin rules that depend on the node a config would land on.

The plugin checks these only when it starts on a node, and fails there:
``using --mig-strategy=mixed is not supported with MPS``, ``sharing using MPS
is not supported for MIG devices``, the MPS daemon's per-GPU client limit
(48 from compute capability 7.5, 16 below), and MIG resources that exist only
under ``migStrategy: mixed``. Tessera checks them first, so a node that would
fail keeps its current config and the policy says which node and why.
"""

from __future__ import annotations

from tessera.domain.base.rules import RuleError
from tessera.domain.sharing.device_plugin import GPU, MPS_MAX_REPLICAS, DevicePluginConfig
from tessera.domain.sharing.nodes import NodeFacts

MPS_MAX_REPLICAS_BEFORE_TURING = 16
_TURING = (7, 5)


def check(config: DevicePluginConfig, node: NodeFacts) -> tuple[RuleError, ...]:
    """Why ``config`` would fail on ``node``; empty when it would start."""
    if config.strategy == "mps":
        return _check_mps(config, node)
    if config.strategy == "time-slicing":
        return _check_time_slicing(config, node)
    return ()


def _check_mps(config: DevicePluginConfig, node: NodeFacts) -> tuple[RuleError, ...]:
    errors: list[RuleError] = []
    if node.mig_strategy == "mixed":
        rule = "MPS is not supported with migStrategy mixed (nvidia.com/mig.strategy=mixed)"
        errors.append(RuleError("spec.backend", rule, node.name))
    elif node.mig_enabled:
        errors.append(RuleError("spec.backend", "MPS is not supported on MIG devices", node.name))
    limit = MPS_MAX_REPLICAS
    if node.compute_capability is not None and node.compute_capability < _TURING:
        limit = MPS_MAX_REPLICAS_BEFORE_TURING
    for r in config.resources:
        if limit < r.replicas <= MPS_MAX_REPLICAS:
            major, minor = node.compute_capability or (0, 0)
            rule = (
                f"MPS allows at most {limit} clients per GPU below compute capability 7.5 "
                f"(this node has {major}.{minor}; got {r.replicas})"
            )
            errors.append(RuleError(f"{r.origin or 'mps'}.replicas", rule, node.name))
    return tuple(errors)


def _check_time_slicing(config: DevicePluginConfig, node: NodeFacts) -> tuple[RuleError, ...]:
    errors: list[RuleError] = []
    for r in config.resources:
        where = f"{r.origin or r.name}.name"
        if r.name == GPU or not r.name.startswith("nvidia.com/mig-"):
            continue
        if node.mig_strategy != "mixed":
            rule = (
                f"{r.name} exists only under migStrategy mixed (this node has "
                f"{node.mig_strategy}; under single, MIG devices are {GPU})"
            )
            errors.append(RuleError(where, rule, node.name))
    return tuple(errors)
