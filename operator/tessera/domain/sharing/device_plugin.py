"""NVIDIA device-plugin config ``version: v1``: built from a policy, checked, rendered.

Only the fields the plugin honours today are written: ``renameByDefault``,
``failRequestsGreaterThanOne`` and ``resources[].name/replicas`` (it forces
``devices: all`` and ignores ``rename``), plus ``flags.mpsRoot`` for MPS,
which the plugin refuses to start without. The plugin's own rules are checked
here, before a key is written, because a bad config crash-loops the plugin on
every node that points at it. Output is byte-stable so the content hash in the
key (``<policy>-<hash>``) moves only when the content does.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.base.rules import RuleError

Strategy = Literal["none", "time-slicing", "mps"]
GPU = "nvidia.com/gpu"
MPS_ROOT = "/run/nvidia/mps"
MPS_MAX_REPLICAS = 48  # per GPU from compute capability 7.5; 16 below (see node_rules)
_MAX_NAME = 63
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_KEY_PREFIX_MAX = _MAX_NAME - 7  # room for "-" and six hex digits: the key is also a label value


@dataclass(frozen=True)
class Replicated:
    """One ``resources[]`` entry; ``origin`` is where it came from, for messages."""

    name: str
    replicas: int
    origin: str = field(default="", compare=False)


@dataclass(frozen=True)
class DevicePluginConfig:
    strategy: Strategy = "none"
    resources: tuple[Replicated, ...] = ()
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool | None = None
    mps_root: str | None = None

    def replicas_of(self, resource: str) -> int:
        """Replicas the plugin advertises per device of ``resource`` (1 = unshared)."""
        return next((r.replicas for r in self.resources if r.name == resource), 1)

    def advertised_as(self, resource: str) -> str:
        """The resource name pods request: ``<name>.shared`` under renameByDefault."""
        shared = self.rename_by_default and self.replicas_of(resource) > 1
        return f"{resource}.shared" if shared else resource


def from_spec(spec: SharingPolicySpec, mps_root: str = MPS_ROOT) -> DevicePluginConfig | None:
    """The config a policy asks for; ``None`` for HAMiCore, which has its own plugin."""
    if spec.backend == "Exclusive":
        return DevicePluginConfig()
    if spec.backend == "MPS" and spec.mps is not None:
        one = Replicated(GPU, spec.mps.replicas, "spec.mps")
        return DevicePluginConfig("mps", (one,), False, True, mps_root)
    if spec.backend == "TimeSlicing" and spec.time_slicing is not None:
        ts = spec.time_slicing
        listed = [
            Replicated(r.name, r.replicas, f"spec.timeSlicing.resources[{i}]")
            for i, r in enumerate(ts.resources)
        ]
        chosen = listed or [Replicated(GPU, ts.replicas, "spec.timeSlicing")]
        ordered = tuple(sorted(chosen, key=lambda r: r.name))  # order means nothing to the plugin
        return DevicePluginConfig(
            "time-slicing", ordered, ts.rename_by_default, ts.fail_requests_greater_than_one
        )
    return None


def validate(config: DevicePluginConfig) -> tuple[RuleError, ...]:
    """The plugin's parse-time rules, plus MPS's own limits that hold on every node."""
    errors: list[RuleError] = []
    if config.strategy != "none" and not config.resources:
        errors.append(RuleError("sharing.resources", "no resources specified"))
    seen: set[str] = set()
    for r in config.resources:
        where = r.origin or f"resources[{r.name}]"
        if len(r.name) > _MAX_NAME:
            errors.append(RuleError(f"{where}.name", f"must be {_MAX_NAME} characters or less"))
        if not r.name.startswith("nvidia.com/") or not _DNS_SUBDOMAIN.match(r.name[11:]):
            errors.append(RuleError(f"{where}.name", "must be nvidia.com/<DNS subdomain>"))
        if r.name in seen:
            errors.append(RuleError(f"{where}.name", f"{r.name} is listed twice"))
        seen.add(r.name)
        if r.replicas < 2:
            errors.append(RuleError(f"{where}.replicas", f"must be >= 2 (got {r.replicas})"))
        if config.strategy == "mps" and r.replicas > MPS_MAX_REPLICAS:
            rule = f"MPS allows at most {MPS_MAX_REPLICAS} clients per GPU (got {r.replicas})"
            errors.append(RuleError(f"{where}.replicas", rule))
        if config.strategy == "mps" and r.name != GPU:
            errors.append(RuleError(f"{where}.name", f"MPS shares only full GPUs ({GPU})"))
    if config.strategy == "mps" and not config.mps_root:
        errors.append(RuleError("flags.mpsRoot", "MPS requires mpsRoot"))
    return tuple(errors)


def render(config: DevicePluginConfig) -> str:
    """The config file, byte-stable: fixed key order, block style, trailing newline."""
    doc: dict[str, Any] = {"version": "v1"}
    if config.strategy == "mps" and config.mps_root:
        doc["flags"] = {"mpsRoot": config.mps_root}
    if config.strategy != "none":
        block: dict[str, Any] = {"renameByDefault": config.rename_by_default}
        if config.fail_requests_greater_than_one is not None:
            block["failRequestsGreaterThanOne"] = config.fail_requests_greater_than_one
        block["resources"] = [{"name": r.name, "replicas": r.replicas} for r in config.resources]
        name = "mps" if config.strategy == "mps" else "timeSlicing"
        doc["sharing"] = {name: block}
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def config_key(policy: str, content: str) -> str:
    """``<policy>-<hash>``: a new key for new content, since edited keys are never reloaded."""
    digest = hashlib.sha256(content.encode()).hexdigest()[:6]
    prefix = policy[:_KEY_PREFIX_MAX].rstrip(".-_")
    return f"{prefix}-{digest}"
