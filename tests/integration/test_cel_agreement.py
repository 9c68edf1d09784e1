"""``tessera plan``'s copy of the CRDs' CEL rules agrees with the API server, rule by rule.

``api.v1alpha1.rules`` (and, for the device and quantity grammars, the models) re-check
what the CRDs declare as ``x-kubernetes-validations``; a twin that drifted would preview as a
change what the sync then fails on, or refuse what the API server takes. Every rule of the
three CRDs is collected by walking their openAPIV3Schema, and ``CASES`` (keyed by the rule's
message text, then by where in the schema the rule sits) holds, for each, manifests generated
from a valid sample by one edit: at least one that breaks exactly that rule and a close
neighbour that passes it. Every case goes to the real API server (one server-side dry run for
all) and, as the same text, to ``manifests.parse``: both refuse, each with the CRD's message,
or both accept. A rule without cases fails the test, so a new rule cannot be skipped.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tessera.domain.preview.manifests import ManifestError, load, parse

from .conftest import ROOT, Kubectl

DROP = object()  # an edit that deletes the field


@dataclass(frozen=True)
class Rule:
    kind: str
    at: str  # the schema node carrying the rule, ``[]`` for list items and map values
    message: str  # the message, or a messageExpression's longest literal
    field_path: str  # the rule's fieldPath ("" when it reports on its own node)


def _literal(expression: str) -> str:
    """The longest single-quoted literal of a CEL messageExpression (its fixed words), map
    literals left out: ``{'910A': '...'}[self.chip]`` is a lookup table, its values vary."""
    fixed = re.sub(r"\{'[^{}]*\}", "", expression)
    return max(re.findall(r"'((?:[^'\\]|\\.)*)'", fixed), key=len)


def _walk(node: Any, at: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if not isinstance(node, Mapping):
        return
    for rule in node.get("x-kubernetes-validations") or ():
        yield at, rule
    for name, child in (node.get("properties") or {}).items():
        yield from _walk(child, f"{at}.{name}" if at else name)
    for key in ("items", "additionalProperties"):
        yield from _walk(node.get(key), f"{at}[]")


def crd_rules() -> list[Rule]:
    """Every x-kubernetes-validations rule of the CRDs in crds/ (status left out: not input)."""
    rules = []
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            for at, rule in _walk(schema["properties"]["spec"], "spec"):
                message = rule.get("message") or _literal(rule["messageExpression"])
                rules.append(Rule(kind, at, message, rule.get("fieldPath", "")))
    return rules


# --- the valid manifests the cases are generated from --------------------------------------


def _samples() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted((ROOT / "config" / "samples").glob("*_*.yaml")):
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        out[body["metadata"]["name"]] = body
    return out


SAMPLES = _samples()


def _set(body: dict[str, Any], path: str, value: Any) -> None:
    """Set (or, with DROP, delete) the field at dotted ``path``; a number indexes a list, and
    an index past the end appends."""
    *parents, last = path.split(".")
    node: Any = body
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        index = int(last)
        if value is DROP:
            del node[index]
        elif index >= len(node):
            node.append(value)
        else:
            node[index] = value
    elif value is DROP:
        del node[last]
    else:
        node[last] = value


def edited(sample: str, edits: Mapping[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(BASES[sample])
    for path, value in edits.items():
        _set(body, path, value if value is DROP else copy.deepcopy(value))
    return body


BASES: dict[str, dict[str, Any]] = dict(SAMPLES)
# Valid manifests of shapes the samples lack, each one edit or two from a sample.
BASES["ts-dra"] = edited(
    "h100-timeslice",
    {"spec.poolRef": {"name": "h100-dra"}, "spec.timeSlicing": DROP, "spec.dra": {}},
)
BASES["ascend-hami"] = edited(
    "hami-a10",
    {"spec.backend": "Exclusive", "spec.hamiCore": DROP, "spec.ascend": {"softSlicing": True}},
)
BASES["hami-sched"] = edited("hami-a10", {"spec.scheduler": {"name": "HAMi"}})
AUTOPILOT = {
    "profiles": {"H100-80GB": {"1g.10gb": {"max": 28}, "3g.40gb": {"min": 1}, "7g.80gb": {}}},
    "pendingFor": "5m",
    "maxReconfigurationsPerGPUPerDay": 1,
}
BASES["h100-auto"] = edited("h100-inference", {"spec.autopilot": AUTOPILOT})


# --- the cases -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    sample: str  # a key of BASES
    edits: Mapping[str, Any]  # dotted path -> new value (DROP deletes; None writes null)
    refused: bool
    plan_says: str = ""  # the plan's words where the models word a refusal their own way
    also: tuple[str, ...] = ()  # rules no manifest can break without breaking this one too


def no(
    sample: str, edits: Mapping[str, Any], plan_says: str = "", also: tuple[str, ...] = ()
) -> Case:
    """A manifest that breaks the rule (and nothing else but ``also``)."""
    return Case(sample, edits, refused=True, plan_says=plan_says, also=also)


def ok(sample: str, edits: Mapping[str, Any] | None = None) -> Case:
    """A close neighbour that passes the rule (and every other)."""
    return Case(sample, edits or {}, refused=False)


NPG, SP, TQ = "NodePoolGeometry", "SharingPolicy", "TenantQuota"
MIG_LAYOUT = {"devices": "7", "profiles": {"1g.10gb": 7}}
VNPU_LAYOUT = {"devices": "7", "templates": {"vir02": 2}}
VGPU_LAYOUT = {"devices": "6", "types": {"A100-20C": 2}}
SHARED = "each index may appear in one explicit layout only"  # the models' words name the index
DEVICES_WORDS = 'is not "all", one index 0-15'  # the device grammar's, for a malformed value


def _layout_rules() -> dict[str, dict[str, list[Case]]]:
    """The rules each of mig, vnpu and vgpu carries on its layouts, for each block."""
    out: dict[str, dict[str, list[Case]]] = {}
    for block, sample, layout in (
        ("mig", "h100-inference", MIG_LAYOUT),
        ("vnpu", "ascend-310p", VNPU_LAYOUT),
        ("vgpu", "a100-vms", VGPU_LAYOUT),
    ):
        first, added = f"spec.{block}.layouts.0.devices", f"spec.{block}.layouts.9"
        no_devices = {k: v for k, v in layout.items() if k != "devices"}
        out.setdefault("at most one layout may apply to devices: all", {})[
            f"{NPG} spec.{block}"
        ] = [
            no(sample, {added: {**layout, "devices": "all"}}),
            no(sample, {added: no_devices}),
            no(sample, {added: {**layout, "devices": None}}),
            ok(sample, {added: {**layout, "devices": "8"}}),
        ]
        out.setdefault("two layouts name the same device index", {})[f"{NPG} spec.{block}"] = [
            no(sample, {first: "0-3", added: {**layout, "devices": "2,9"}}, SHARED),
            no(sample, {first: 5, added: {**layout, "devices": "4-5"}}, SHARED),
            ok(sample, {first: "0-3", added: {**layout, "devices": "4,9"}}),
        ]
        out.setdefault("with ranges running upwards and no index named twice", {})[
            f"{NPG} spec.{block}.layouts[].devices"
        ] = [
            no(sample, {first: "3-0"}, "runs backwards"),
            no(sample, {first: "0-3,2"}, "is named twice"),
            no(sample, {first: "0, 1"}, DEVICES_WORDS),
            ok(sample, {first: "0-3"}),
            ok(sample, {first: "0,3-5"}),
        ]
    return out


def _max_unavailable(sample: str) -> list[Case]:
    path = "spec.rollout.maxUnavailable"
    return [
        no(sample, {path: 0}),
        no(sample, {path: "150%"}),
        no(sample, {path: "0%"}),
        no(sample, {path: "5"}),
        no(sample, {path: "1%\n"}),  # RE2's $ is the end of the text, Python's not quite
        ok(sample, {path: 1}),
        ok(sample, {path: "100%"}),
        ok(sample, {path: "1%"}),
        ok(sample, {path: None}),
    ]


UNKNOWN = "no GPU model in Tessera's catalog has one of these MIG profiles"
CANNOT_HOST = "a GPU model cannot host a profile listed under it"
H100_AUTO = "spec.autopilot.profiles.H100-80GB"
MIXING = "time-sliced and MIG-backed vGPU types cannot be mixed"
RESOURCE_NAMES = "resource names are qualified extended resources"
WHOLE_COUNT = "is not a whole, non-negative count"

CASES: dict[str, dict[str, list[Case]]] = {
    # NodePoolGeometry
    "set one of spec.mig, spec.vnpu or spec.vgpu": {
        f"{NPG} spec": [
            no("h100-inference", {"spec.mig": DROP}),
            no("h100-inference", {"spec.mig": DROP, "spec.allocation": "DevicePlugin"}),
            no("h100-inference", {"spec.mig": None}),  # the API server drops a null field
            ok("h100-dra", {"spec.mig": DROP}),
            ok("h100-inference"),
        ],
    },
    "mig and vnpu are mutually exclusive": {
        f"{NPG} spec": [
            no("ascend-310p", {"spec.mig": {"layouts": [MIG_LAYOUT]}}),
            ok("ascend-310p"),
            ok("ascend-310p", {"spec.mig": None}),
            ok("h100-inference"),
        ],
    },
    "vgpu is exclusive with mig and vnpu": {
        f"{NPG} spec": [
            no("a100-vms", {"spec.mig": {"layouts": [MIG_LAYOUT]}}),
            no("a100-vms", {"spec.vnpu": {"layouts": [VNPU_LAYOUT]}}),
            ok("a100-vms"),
            ok("a100-vms", {"spec.mig": None}),
        ],
    },
    "a vgpu pool serves VMs through the sandbox device plugin": {
        f"{NPG} spec": [
            no("a100-vms", {"spec.allocation": "DRA"}),
            ok("a100-vms", {"spec.allocation": "DevicePlugin"}),
        ],
    },
    "drain.force cannot be set on a vgpu pool": {
        f"{NPG} spec": [
            no("a100-vms", {"spec.rollout.drain.force": True}),
            ok("a100-vms", {"spec.rollout.drain.force": False}),
            ok("a100-vms", {"spec.rollout.drain.force": None}),
            ok("a100-small", {"spec.rollout.drain": {"force": True}}),
        ],
    },
    "spec.dra applies only to a pool with allocation: DRA": {
        f"{NPG} spec": [
            no("h100-inference", {"spec.dra": {"featureGates": {"mpsSupport": True}}}),
            no("h100-dra", {"spec.allocation": "DevicePlugin", "spec.dra": {}}),
            ok("h100-dra", {"spec.dra": {"featureGates": {"mpsSupport": True}}}),
            ok("h100-inference", {"spec.dra": None}),
        ],
    },
    "allocation DRA is for NVIDIA GPUs": {
        f"{NPG} spec": [
            no("ascend-310p", {"spec.allocation": "DRA"}),
            ok("ascend-310p", {"spec.allocation": "DevicePlugin"}),
        ],
    },
    "migStrategy single is a device-plugin setting": {
        f"{NPG} spec": [
            no("h100-dra", {"spec.migStrategy": "single"}),
            ok("h100-dra", {"spec.migStrategy": "mixed"}),
            ok("h100-dra", {"spec.migStrategy": None}),
            ok("h100-inference", {"spec.migStrategy": "single"}),
        ],
    },
    **_layout_rules(),
    "MIG profile names look like 1g.10gb": {
        f"{NPG} spec.mig.layouts[].profiles": [
            # a malformed name is in no catalog either: the API server gives both, the plan the first
            no("h100-inference", {"spec.mig.layouts.1.profiles": {"1g.10GB": 1}}, also=(UNKNOWN,)),
            no("h100-inference", {"spec.mig.layouts.1.profiles": {"1g10gb": 1}}, also=(UNKNOWN,)),
            no("h100-inference", {"spec.mig.layouts.1.profiles": {"1g.10gb\n": 1}}, also=(UNKNOWN,)),
            ok("h100-inference", {"spec.mig.layouts.1.profiles": {"1g.10gb+me": 1}}),
        ],
        f"{NPG} spec.autopilot.profiles[]": [
            no("h100-auto", {H100_AUTO: {"1g.10GB": {}}}, also=(UNKNOWN,)),
            ok("h100-auto", {H100_AUTO: {"1g.10gb+me": {}}}),
        ],
    },
    UNKNOWN: {
        f"{NPG} spec.mig.layouts[].profiles": [
            no("h100-inference", {"spec.mig.layouts.1.profiles": {"1g.11gb": 1}}),
            no("h100-inference", {"spec.mig.layouts.1.profiles": {"2g.11gb": 1}}),
            ok("h100-inference", {"spec.mig.layouts.1.profiles": {"1g.12gb": 1}}),
        ],
        f"{NPG} spec.autopilot.profiles[]": [
            no("h100-auto", {"spec.autopilot.profiles.A100-80GB": {"1g.11gb": {}}}),
            ok("h100-auto", {"spec.autopilot.profiles.A100-80GB": {"1g.20gb": {}}}),
        ],
    },
    "autopilot chooses MIG layouts of a device-plugin pool": {
        f"{NPG} spec": [
            no("h100-auto", {"spec.migStrategy": "single"}),
            no("h100-dra", {"spec.autopilot": AUTOPILOT}),
            no("ascend-310p", {"spec.autopilot": AUTOPILOT}),
            ok("h100-auto"),
            ok("h100-auto", {"spec.migStrategy": "mixed", "spec.allocation": "DevicePlugin"}),
            ok("h100-dra", {"spec.autopilot": None}),
        ],
    },
    "autopilot.profiles is keyed by GPU model id": {
        f"{NPG} spec.autopilot.profiles": [
            no("h100-auto", {"spec.autopilot.profiles.H100": {"1g.10gb": {}}}),  # an alias
            no("h100-auto", {"spec.autopilot.profiles.V100-32GB": {"1g.10gb": {}}}),
            ok("h100-auto", {"spec.autopilot.profiles.A100-80GB": {"1g.10gb": {}}}),
        ],
    },
    CANNOT_HOST: {
        f"{NPG} spec.autopilot.profiles": [
            no("h100-auto", {H100_AUTO: {"1g.12gb": {}}}),  # an H100 94GB's
            no("h100-auto", {"spec.autopilot.profiles.A30-24GB": {"7g.80gb": {"max": 1}}}),
            ok("h100-auto", {"spec.autopilot.profiles.H100-94GB": {"1g.12gb": {}}}),
        ],
    },
    "min must not be above max": {
        f"{NPG} spec.autopilot.profiles[][]": [
            no("h100-auto", {H100_AUTO: {"1g.10gb": {"min": 29, "max": 28}}}),
            ok("h100-auto", {H100_AUTO: {"1g.10gb": {"min": 28, "max": 28}}}),
            ok("h100-auto", {H100_AUTO: {"1g.10gb": {"min": 29}}}),
            ok("h100-auto", {H100_AUTO: {"1g.10gb": {"max": 0}}}),
        ],
    },
    "vNPU template names look like vir01": {
        f"{NPG} spec.vnpu.layouts[].templates": [
            no("ascend-310p", {"spec.vnpu.layouts.0.templates": {"vir4": 1}}),
            no("ascend-310p", {"spec.vnpu.layouts.0.templates": {"vir04_3C": 1}}),
            no("ascend-310p", {"spec.vnpu.layouts.0.templates": {"vir04\n": 1}}),
            ok("ascend-310p", {"spec.vnpu.layouts.0.templates": {"vir10_3c_16g": 1}}),
        ],
    },
    MIXING: {
        f"{NPG} spec.vgpu.layouts[]": [
            no("a100-vms", {"spec.vgpu.layouts.0.types": {"A100-20C": 1, "A100-1-5C": 1}}),
            ok("a100-vms", {"spec.vgpu.layouts.0.types": {"A100-10C": 1, "A100-20C": 1}}),
            ok("a100-vms", {"spec.vgpu.layouts.0.types": {"A100-1-5C": 1, "A100-1-5CME": 1}}),
        ],
    },
    "vGPU type names look like A100D-20C": {
        f"{NPG} spec.vgpu.layouts[].types": [
            # a malformed name is of neither form, so the types mix too (the plan says the first)
            no("a100-vms", {"spec.vgpu.layouts.0.types": {"A100-20GB": 2}}, also=(MIXING,)),
            no("a100-vms", {"spec.vgpu.layouts.0.types": {"a100-20c": 2}}, also=(MIXING,)),
            no("a100-vms", {"spec.vgpu.layouts.0.types": {"A100-20C\n": 2}}, also=(MIXING,)),
            ok("a100-vms", {"spec.vgpu.layouts.0.types": {"L40S-12Q": 2}}),
        ],
    },
    "maxUnavailable must be a whole number >= 1 or a percentage": {
        f"{NPG} spec.rollout": _max_unavailable("a100-small"),
        f"{SP} spec.rollout": _max_unavailable("notebooks-mps"),
    },
    # SharingPolicy
    "set exactly one of nodeSelector or poolRef": {
        f"{SP} spec": [
            no("notebooks-mps", {"spec.poolRef": {"name": "h100-inference"}}),
            no("h100-timeslice", {"spec.poolRef": DROP}),
            ok("notebooks-mps"),
            ok("notebooks-mps", {"spec.poolRef": None}),
            ok("h100-timeslice"),
        ],
    },
    "spec.timeSlicing must be set exactly when backend is TimeSlicing": {
        f"{SP} spec": [
            no("h100-timeslice", {"spec.timeSlicing": DROP}),
            no("notebooks-mps", {"spec.timeSlicing": {"replicas": 2}}),
            no("ts-dra", {"spec.timeSlicing": {"replicas": 2}}),
            ok("h100-timeslice"),
            ok("notebooks-mps", {"spec.timeSlicing": None}),
            ok("ts-dra"),
        ],
    },
    "spec.mps must be set exactly when backend is MPS": {
        f"{SP} spec": [
            no("notebooks-mps", {"spec.mps": DROP}),
            no("h100-timeslice", {"spec.mps": {"replicas": 2}}),
            no("ts-dra", {"spec.mps": {"replicas": 2}}),
            ok("notebooks-mps"),
        ],
    },
    "spec.hamiCore must be set exactly when backend is HAMiCore": {
        f"{SP} spec": [
            no("hami-a10", {"spec.hamiCore": DROP}),
            no("notebooks-mps", {"spec.hamiCore": {"deviceSplitCount": 4}}),
            no("ts-dra", {"spec.hamiCore": {"deviceSplitCount": 4}}),
            ok("hami-a10"),
        ],
    },
    "spec.dra needs poolRef": {
        f"{SP} spec": [
            no("ts-dra", {"spec.poolRef": DROP, "spec.nodeSelector": {"matchLabels": {"p": "q"}}}),
            ok("ts-dra"),
        ],
    },
    "backend HAMiCore has no DRA form": {
        f"{SP} spec": [
            no("ts-dra", {"spec.backend": "HAMiCore"}),
            ok("ts-dra", {"spec.backend": "MPS"}),
        ],
    },
    "spec.dra.timeSlicing is for backend TimeSlicing": {
        f"{SP} spec": [
            no("ts-dra", {"spec.backend": "MPS", "spec.dra.timeSlicing": {"interval": "Long"}}),
            ok("ts-dra", {"spec.dra.timeSlicing": {"interval": "Long"}}),
        ],
    },
    "spec.dra.mps is for backend MPS": {
        f"{SP} spec": [
            no("ts-dra", {"spec.dra.mps": {"defaultActiveThreadPercentage": 50}}),
            ok("ts-dra", {"spec.backend": "MPS", "spec.dra.mps": {"defaultActiveThreadPercentage": 50}}),
            ok("ts-dra", {"spec.dra.mps": None}),
        ],
    },
    "spec.scheduler is for HAMi slices": {
        f"{SP} spec": [
            no("notebooks-mps", {"spec.scheduler": {"name": "HAMi"}}),
            ok("hami-sched"),
            ok("ascend-hami", {"spec.scheduler": {"name": "HAMi"}}),
            ok("notebooks-mps", {"spec.scheduler": None}),
        ],
    },
    "spec.ascend.softSlicing is the old spelling of mode": {
        f"{SP} spec.ascend": [
            no("ascend-hami", {"spec.ascend": {"softSlicing": True, "mode": "Templates"}}),
            no("ascend-hami", {"spec.ascend": {"softSlicing": False, "mode": "HAMiCore"}}),
            ok("ascend-hami", {"spec.ascend": {"softSlicing": True, "mode": "HAMiCore"}}),
            ok("ascend-hami", {"spec.ascend": {"mode": "HAMiCore"}}),
            ok("ascend-hami", {"spec.ascend": {"softSlicing": None, "mode": "Templates"}}),
        ],
    },
    "spec.ascend.mode MindCluster is Volcano's deviceshare plugin": {
        f"{SP} spec": [
            no("ascend-hami", {"spec.ascend": {"mode": "MindCluster"}}),
            no("ascend-hami", {"spec.ascend": {"mode": "MindCluster"}, "spec.scheduler": {"name": "HAMi"}}),
            ok("ascend-hami", {"spec.ascend": {"mode": "MindCluster"}, "spec.scheduler": {"name": "Volcano", "volcano": {}}}),
            ok("ascend-hami", {"spec.ascend": {"mode": "Templates"}}),
        ],
    },
    "spec.ascend.mode VCannRT is scheduled by Volcano alone": {
        f"{SP} spec": [
            no("ascend-hami", {"spec.ascend": {"mode": "VCannRT"}}),
            no("ascend-hami", {"spec.ascend": {"mode": "VCannRT"}, "spec.scheduler": {"name": "HAMi"}}),
            ok("ascend-hami", {"spec.ascend": {"mode": "VCannRT", "chip": "910B4"}, "spec.scheduler": {"name": "Volcano", "volcano": {}}}),
        ],
    },
    # the Ascend support matrix (ascend_support), both rules
    ") does not support ": {
        f"{SP} spec.ascend": [
            no("ascend-hami", {"spec.ascend.chip": "910A"}),  # softSlicing: HAMi-core
            no("ascend-hami", {"spec.ascend": {"chip": "910C", "mode": "HAMiCore"}}),
            no("ascend-hami", {"spec.ascend": {"chip": "910B2", "softSlicing": True}}),
            ok("ascend-hami", {"spec.ascend.chip": "310P3"}),
            ok("ascend-hami", {"spec.ascend": {"chip": "910A", "softSlicing": False}}),
            ok("ascend-hami", {"spec.ascend": {"chip": "910B4", "mode": "HAMiCore"}}),
        ],
        f"{NPG} spec.vnpu": [
            no("ascend-310p", {"spec.vnpu.chip": "910A"}),
            no("ascend-310p", {"spec.vnpu.chip": "910C"}),
            ok("ascend-310p", {"spec.vnpu.chip": "310P3"}),
            ok("ascend-310p", {"spec.vnpu.chip": "910B4"}),
        ],
    },
    "spec.scheduler and spec.dra are exclusive": {
        f"{SP} spec": [
            no("ts-dra", {"spec.ascend": {"softSlicing": True}, "spec.scheduler": {"name": "HAMi"}}),
            ok("ts-dra", {"spec.ascend": {"softSlicing": True}}),
            ok("ts-dra", {"spec.ascend": {"softSlicing": True}, "spec.scheduler": None}),
        ],
    },
    "spec.dra.mps.defaultPerDevicePinnedMemoryLimit cannot be set": {
        f"{SP} spec.dra.mps.defaultPerDevicePinnedMemoryLimit": [
            no(
                "ts-dra",
                {"spec.backend": "MPS", "spec.dra.mps": {"defaultPerDevicePinnedMemoryLimit": {"1": "5Gi"}}},
            ),
            ok(
                "ts-dra",
                {"spec.backend": "MPS", "spec.dra.mps": {"defaultPinnedDeviceMemoryLimit": "5Gi"}},
            ),
            ok("ts-dra", {"spec.backend": "MPS", "spec.dra.mps": {"defaultPerDevicePinnedMemoryLimit": {}}}),
        ],
    },
    "spec.scheduler.volcano must be set exactly when scheduler name is Volcano": {
        f"{SP} spec.scheduler": [
            no("hami-sched", {"spec.scheduler.name": "Volcano"}),
            no("hami-sched", {"spec.scheduler.volcano": {"policy": "binpack", "weight": 10}}),
            ok("hami-sched", {"spec.scheduler.name": "Volcano", "spec.scheduler.volcano": {"policy": "binpack"}}),
            ok("hami-sched", {"spec.scheduler.volcano": None}),
        ],
    },
    # TenantQuota
    "set at least one resource in hard or total": {
        f"{TQ} spec": [
            no("team-a", {"spec.hard": DROP, "spec.total": DROP}),
            no("team-a", {"spec.hard": {}, "spec.total": {}}),
            no("team-a", {"spec.hard": None, "spec.total": None}),
            ok("team-a", {"spec.hard": {}}),
            ok("team-a", {"spec.total": DROP}),
        ],
    },
    RESOURCE_NAMES: {
        f"{TQ} spec.{limit}": [
            no("team-a", {f"spec.{limit}": {"gpu": 1}}),
            no("team-a", {f"spec.{limit}": {"nvidia.com/": 1}}),
            no("team-a", {f"spec.{limit}": {"nvidia.com/gpu\n": 1}}),
            ok("team-a", {f"spec.{limit}": {"count/resourceclaims.resource.k8s.io": 1}}),
        ]
        for limit in ("hard", "total")
    },
    WHOLE_COUNT: {
        f"{TQ} spec.{limit}[]": [
            no("team-a", {f"spec.{limit}": {"nvidia.com/gpu": "0.5"}}, "0.5"),
            no("team-a", {f"spec.{limit}": {"nvidia.com/gpu": "500m"}}, "500m"),
            ok("team-a", {f"spec.{limit}": {"nvidia.com/gpu": "1k"}}),
            ok("team-a", {f"spec.{limit}": {"nvidia.com/gpu": "2Ki"}}),
        ]
        for limit in ("hard", "total")
    },
}  # fmt: skip


RULES = crd_rules()


def _rule_of(prefix: str, where: str) -> Rule:
    kind, _, at = where.partition(" ")
    found = [r for r in RULES if r.kind == kind and r.at == at and prefix in r.message]
    assert len(found) == 1, f"{prefix!r} at {where}: {len(found)} CRD rules match"
    return found[0]


@dataclass(frozen=True)
class Check:
    rule: Rule
    case: Case
    name: str  # the object's metadata.name, unique across the batch

    @property
    def text(self) -> str:
        body = edited(self.case.sample, self.case.edits)
        body["metadata"] = {"name": self.name}
        return yaml.safe_dump(body, sort_keys=False)


def _checks() -> list[Check]:
    checks = []
    for prefix, places in CASES.items():
        for where, cases in places.items():
            rule = _rule_of(prefix, where)
            for case in cases:
                checks.append(Check(rule, case, f"cel-{len(checks):03d}"))
    return checks


CHECKS = _checks()


def _id(check: Check) -> str:
    verdict = "refused" if check.case.refused else "accepted"
    return f"{check.name}-{check.rule.kind}-{check.rule.at}-{verdict}"


def test_every_crd_rule_has_a_refused_case_and_an_accepted_neighbour() -> None:
    covered: dict[Rule, set[bool]] = {}
    for check in CHECKS:
        covered.setdefault(check.rule, set()).add(check.case.refused)
    missing = [r for r in RULES if covered.get(r) != {True, False}]
    assert not missing, "CEL rules without a refused and an accepted case:\n" + "\n".join(
        f"  {r.kind} {r.at}: {r.message}" for r in missing
    )
    assert len(RULES) == len(set(RULES)), "two CEL rules on one node with one message"


def test_no_spec_field_is_nullable_or_defaulted() -> None:
    """What lets the plan drop every null of a spec (``manifests.without_nulls``) as the API
    server does before its rules run: a nullable or defaulted field would keep, or fill, it."""

    def marked(node: Any, at: str) -> Iterator[str]:
        if isinstance(node, Mapping):
            if node.get("nullable") or "default" in node:
                yield at
            for key, child in node.items():
                yield from marked(child, f"{at}.{key}")
        elif isinstance(node, list):
            for child in node:
                yield from marked(child, at)

    for path in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        for version in crd["spec"]["versions"]:
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            assert list(marked(spec, "spec")) == [], path.name


@pytest.fixture(scope="module")
def server_says(kubectl: Kubectl) -> dict[str, str | None]:
    """Every case through one server-side dry run: name -> the server's error, None if taken."""
    stream = "---\n".join(check.text for check in CHECKS)
    result = kubectl("create", "--dry-run=server", "-f", "-", stdin=stream)
    said: dict[str, str | None] = {}
    for line in result.stderr.splitlines():
        if match := re.search(r'"(cel-\d{3})" is invalid: (.*)', line):
            said[match[1]] = match[2]
    for name in re.findall(r"/(cel-\d{3}) created", result.stdout):
        said[name] = None
    assert set(said) == {c.name for c in CHECKS}, result.stderr
    return said


def _server_field(rule: Rule) -> str:
    """A regex of the field the API server names for ``rule``'s error."""
    return re.escape(rule.at + rule.field_path).replace(r"\[\]", r"\[[^\]]+\]")


def _plan_says(check: Check) -> str | None:
    try:
        parse(load(check.text, f"{check.name}.yaml"))
    except ManifestError as err:
        return str(err)
    return None


@pytest.mark.parametrize("check", CHECKS, ids=_id)
def test_plan_and_api_server_agree(server_says: dict[str, str | None], check: Check) -> None:
    server, plan = server_says[check.name], _plan_says(check)
    rule, case = check.rule, check.case
    if not case.refused:
        assert server is None, f"the API server refused the neighbour: {server}"
        assert plan is None, f"the plan refused what the API server takes: {plan}"
        return
    assert server is not None, "the API server took the case meant to break the rule"
    errors = re.findall(r"(?:^\[?|, )(spec\S*): (?:Invalid|Required|Unsupported) value: ", server)
    assert len(errors) == 1 + len(case.also), f"not exactly the rule (and {case.also}): {server}"
    assert re.match(r"\[?" + _server_field(rule) + ": Invalid value: ", server), server
    assert all(message in server for message in (rule.message, *case.also)), server
    assert plan is not None, f"the plan took what the API server refuses: {server}"
    assert (case.plan_says or rule.message) in plan, plan
    if not case.plan_says:  # api.v1alpha1.rules' twin: the field the API server names, too
        field = re.match(r"\[?(spec\S*): ", server)
        assert field, server
        named = re.search(rf"{rule.kind}/{check.name}: (\S+): ", plan)
        assert named, plan
        assert named[1] == re.sub(r"\[([^\]]+)\]", r".\1", field[1]), (server, plan)
