"""The field report's chain in the demo: Volcano + HAMi-core soft slicing of Ascend 310P3.

Four places had to agree before one pod got its 8 GiB slice (issue 17): HAMi's per-node config
(``hami-vnpu-core``), HAMi's ``hami-scheduler-device`` (``vnpus.hamiVnpuCore``, the chip's
entry), Volcano's ``deviceshare`` arguments (then a restart), and every pod's contract. Here one
SharingPolicy (``soft_slicing.yaml``, also the example "Schedulers: HAMi and Volcano" of
docs/examples.md) declares it on the pool ``ascend-310p-soft`` (310P3 nodes labelled
``ascend=on``, where the simulated HAMi Ascend plugin runs), against stand-in HAMi and Volcano
installs (``schedulers``), and :func:`checks` looks at each place from outside, as a person
would.

Each check names the part of Tessera it depends on (``needs``); :data:`REQUIRED` lists the
parts present on this branch, whose checks must pass for ``make demo`` to succeed. The others
are printed as pending, naming what they wait for. Pods are sent with ``kubectl create
--dry-run=server``: the API server's admission answers (warnings included), nothing stays
Pending for a Volcano binary that the dev cluster does not run.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devcluster import schedulers, watchdog
from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.api import constants as c

MANIFEST = Path(__file__).with_name("soft_slicing.yaml")
POOL, NAMESPACE, RUNTIME_CLASS = "ascend-310p-soft", "inference", "ascend"
NPU, MODE_ANNOTATION = "huawei.com/Ascend310P", "huawei.com/vnpu-mode"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
# The parts of Tessera whose checks must pass ("" is what main had before issue 17); all four
# since issue 17's scheduler side landed. A part missing on a branch is printed as pending.
REQUIRED = frozenset({"", "hamisched", "volcano", "podcontract"})
WAITS_FOR = {
    "hamisched": "Tessera's sync of hami-scheduler-device (issue 17 item 2)",
    "volcano": "Tessera's edit of volcano-scheduler.conf and the restart (issue 17 item 3)",
    "podcontract": "Tessera's ValidatingAdmissionPolicy for the pod contract (issue 17 item 5)",
}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    needs: str = ""  # the part of Tessera it depends on (WAITS_FOR); "" for what main has

    @property
    def required(self) -> bool:
        return self.needs in REQUIRED


def manifests() -> list[Obj]:
    """The policy, then the pod with the whole contract, then the pod without the annotation."""
    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def install(kube: Kube) -> None:
    """HAMi and Volcano (stand-ins), the Ascend runtime class, the pods' namespace."""
    schedulers.install_hami(kube)
    schedulers.install_volcano(kube)
    runtime = {"metadata": {"name": RUNTIME_CLASS}, "handler": RUNTIME_CLASS}
    for path, body in (
        (path_of("node.k8s.io/v1", "runtimeclasses"), runtime),
        ("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}),
    ):
        try:
            kube.create(path, body)
        except ApiError as err:
            if not err.conflict:
                raise


def admission(kubectl: Sequence[str], pod: Obj) -> tuple[bool, list[str]]:
    """(admitted, warnings) of the API server for creating ``pod``, by a server-side dry run
    under a name of its own (a pod of that name may exist: its apply would be an update)."""
    probe = {**pod, "metadata": {**pod["metadata"], "name": pod["metadata"]["name"] + "-probe"}}
    run = subprocess.run(
        [*kubectl, "create", "--dry-run=server", "-n", NAMESPACE, "-f", "-"],
        input=yaml.safe_dump(probe),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    warnings = [line for line in run.stderr.splitlines() if line.startswith("Warning:")]
    return run.returncode == 0, warnings


def checks(kube: Kube, kubectl: Sequence[str]) -> list[Check]:
    """Each place of the chain, as it stands now."""
    policy_doc, good, bad = manifests()
    name = policy_doc["metadata"]["name"]
    sp = kube.get_or_none(f"/apis/{c.GROUP}/{c.VERSION}/sharingpolicies/{name}") or {}
    vap = ((sp.get("status") or {}).get("scheduler") or {}).get("admissionPolicy") or ""
    path = path_of("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", vap)
    guarded = bool(vap) and kube.get_or_none(path) is not None
    good_in, good_warned = admission(kubectl, good)
    bad_in, bad_warned = admission(kubectl, bad)
    named = [w for w in bad_warned if MODE_ANNOTATION in w]
    return [
        _soft_slicing(kube, sp),
        _policy_ready(sp),
        _hami_config(kube),
        *_volcano(kube, sp),
        Check(
            "the pod with the whole contract is admitted, unwarned",
            guarded and good_in and not good_warned,
            f"ValidatingAdmissionPolicy {vap or '(none)'}; warnings: {good_warned or 'none'}",
            "podcontract",
        ),
        Check(
            f"the pod without {MODE_ANNOTATION} is warned",
            bad_in and bool(named),
            "; ".join(bad_warned) or "no warning",
            "podcontract",
        ),
    ]


def wait(kube: Kube, kubectl: Sequence[str], timeout: float, grace: float = 20.0) -> list[Check]:
    """:func:`checks` once every check passes; or ``grace`` seconds after every required one
    did (the others wait for parts this branch lacks); or at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        watchdog.check()
        found = checks(kube, kubectl)
        now = time.monotonic()
        if all(x.ok for x in found) or now > deadline:
            return found
        if all(x.ok for x in found if x.required):
            deadline = min(deadline, now + grace)
        time.sleep(1.0)  # polling the API with a deadline


def report(found: Sequence[Check]) -> tuple[str, bool]:
    """The lines ``make demo`` prints, and whether every required check passed."""
    lines = []
    for x in found:
        state = "ok" if x.ok else ("FAILED" if x.required else "pending")
        waits = "" if x.ok or x.required else f" (waits for {WAITS_FOR[x.needs]})"
        lines.append(f"    {state:<8} {x.name}: {x.detail}{waits}")
    return "\n".join(lines), all(x.ok for x in found if x.required)


# -- the places -----------------------------------------------------------------------------


def _ready(sp: Obj) -> bool:
    status = sp.get("status") or {}
    conds = status.get("conditions") or []
    cond: dict[str, Any] = next((x for x in conds if x.get("type") == "Ready"), {})
    generation = (sp.get("metadata") or {}).get("generation")
    return cond.get("status") == "True" and status.get("observedGeneration") == generation


def _soft_slicing(kube: Kube, sp: Obj) -> Check:
    slots = int(((sp.get("spec") or {}).get("ascend") or {}).get("vDeviceCount") or 0)
    nodes = kube.list("/api/v1/nodes", label_selector=f"{c.POOL_LABEL}={POOL}")
    seen = []
    for node in nodes:
        notes = node["metadata"].get("annotations") or {}
        cards = int(node["metadata"]["labels"].get(c.NPU_COUNT_LABEL, "0"))
        alloc = int((node.get("status") or {}).get("allocatable", {}).get(NPU, "0"))
        soft = notes.get(c.HAMI_VNPU_CORE_ANNOTATION) == "true"
        seen.append((soft and alloc == cards * slots, f"{node['metadata']['name']}: {alloc}"))
    ok = bool(seen) and all(s for s, _ in seen)
    detail = f"{NPU} " + ", ".join(d for _, d in seen)
    return Check("soft slicing on (hami-vnpu-core, slices per card)", ok, detail)


def _policy_ready(sp: Obj) -> Check:
    """Ready for its generation: with spec.scheduler, the scheduler side agrees too."""
    conds = (sp.get("status") or {}).get("conditions") or []
    cond: dict[str, Any] = next((x for x in conds if x.get("type") == "Ready"), {})
    detail = f"{cond.get('reason', '-')}: {cond.get('message', '')}"[:300]
    return Check("the policy is Ready", _ready(sp), detail, "hamisched")


def _device_doc(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    cm = kube.get_or_none(path_of("v1", "configmaps", name, namespace)) or {}
    try:
        doc = yaml.safe_load((cm.get("data") or {}).get(c.HAMI_SCHEDULER_CONFIGMAP_KEY) or "")
    except yaml.YAMLError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _chips(doc: dict[str, Any]) -> list[str]:
    vnpus = doc.get("vnpus")
    configs = vnpus.get("configs") if isinstance(vnpus, dict) else vnpus
    return [str(e.get("chipName")) for e in configs or [] if isinstance(e, dict)]


def _hami_config(kube: Kube) -> Check:
    doc = _device_doc(kube, schedulers.HAMI_NAMESPACE, schedulers.HAMI_CONFIGMAP)
    vnpus = doc.get("vnpus")
    core = isinstance(vnpus, dict) and vnpus.get("hamiVnpuCore") is True
    ok = core and "310P3" in _chips(doc)
    detail = f"vnpus.hamiVnpuCore {core}, chips {_chips(doc)}"
    return Check("HAMi's hami-scheduler-device agrees", ok, detail, "hamisched")


def _volcano(kube: Kube, sp: Obj) -> list[Check]:
    path = path_of("v1", "configmaps", schedulers.VOLCANO_CONFIGMAP, schedulers.VOLCANO_NAMESPACE)
    text = ((kube.get_or_none(path) or {}).get("data") or {}).get(
        c.VOLCANO_SCHEDULER_CONFIGMAP_KEY, ""
    )
    try:
        conf = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        conf = {}  # a conf Volcano could not read agrees with nothing
    plugins = [p for tier in conf.get("tiers") or [] for p in tier.get("plugins") or []]
    args = next((p.get("arguments") or {} for p in plugins if p.get("name") == "deviceshare"), {})
    where = (
        str(args.get("deviceshare.KnownGeometriesCMNamespace", "")),
        str(args.get("deviceshare.KnownGeometriesCMName", "")),
    )
    chips = _chips(_device_doc(kube, *where)) if all(where) else []
    ok = (
        str(args.get("deviceshare.AscendHAMiVNPUEnable")).lower() == "true"
        and args.get("deviceshare.SchedulePolicy") == "binpack"
        and str(args.get("deviceshare.ScheduleWeight")) == "10"
        and "310P3" in chips
    )
    shown = {k.removeprefix("deviceshare."): v for k, v in args.items()}
    pods = schedulers.pods(kube, schedulers.VOLCANO_NAMESPACE, schedulers.VOLCANO_DEPLOYMENT)
    restarted = [p for p in pods if RESTARTED_AT in (p["metadata"].get("annotations") or {})]
    pending = ((sp.get("status") or {}).get("scheduler") or {}).get("restartPending")
    return [
        Check(
            "Volcano's deviceshare agrees", ok, f"{shown or 'no deviceshare'}; {chips}", "volcano"
        ),
        Check(
            "Volcano restarted to read it",
            ok and pending is False and bool(restarted),
            f"restartPending {pending}; pods restarted: {len(restarted)}",
            "volcano",
        ),
    ]
