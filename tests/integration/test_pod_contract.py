"""A SharingPolicy's pod contract, enforced by the real API server (no webhook).

A platform engineer declares soft slicing of Ascend 310P3 nodes scheduled by Volcano;
Tessera writes a ValidatingAdmissionPolicy + binding for the policy. Workload owners apply
their Deployments and pods with ``kubectl`` as a namespace user (a ServiceAccount bound to
``edit`` in its namespace, not admin): the full contract passes silently, a missing piece
is warned — or refused under ``podContract: Deny`` — with kubectl printing the message that
names it. The API server picks up a new or changed admission policy asynchronously, so every
test first polls a server-side dry run (admission runs, nothing is stored) until the policy
answers, then makes the real request.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import fleet, identity, schedulers
from devcluster.controlplane import ControlPlane
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c
from tessera.domain import admission

from .conftest import OperatorProcess
from .helpers import eventually, namespace
from .sharing_support import SP, delete_policy, event_with, policy
from .test_plan import plan

WORK = "pc-work"
USER = identity.Account(WORK, "dev")
POOL = "pc-pool"
NAME = "pc-asc"
VAP = admission.name_of(NAME)
MISSING_ANNOTATION = "annotation huawei.com/vnpu-mode: hami-core is missing"


class User:
    """kubectl as the namespace user ``dev`` (edit in ``pc-work`` only)."""

    def __init__(self, plane: ControlPlane, kubeconfig: Path) -> None:
        self.plane, self.kubeconfig = plane, kubeconfig

    def __call__(self, *args: str, body: Obj) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.plane.kubectl), f"--kubeconfig={self.kubeconfig}", "-n", WORK, *args],
            input=yaml.safe_dump(body),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def apply(self, body: Obj, *, dry_run: bool = False) -> subprocess.CompletedProcess[str]:
        return self("apply", *(["--dry-run=server"] if dry_run else []), "-f", "-", body=body)


@pytest.fixture(scope="module")
def user(
    control_plane: ControlPlane, kube: Kube, operator: OperatorProcess, tmp_path_factory: Any
) -> Iterator[User]:
    """The workload team's namespace and user, the Ascend nodes, RuntimeClass ``ascend``
    (installed with the Ascend runtime)."""
    namespace(kube, WORK)
    kube.create(path_of("v1", "serviceaccounts", namespace=WORK), _meta("ServiceAccount", "dev"))
    binding = {
        **_meta("RoleBinding", "dev-edit", "rbac.authorization.k8s.io/v1"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "dev", "namespace": WORK}],
    }
    kube.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{WORK}/rolebindings", binding)
    if kube.get_or_none("/apis/node.k8s.io/v1/runtimeclasses/ascend") is None:
        runtime = {**_meta("RuntimeClass", "ascend", "node.k8s.io/v1"), "handler": "ascend"}
        kube.create("/apis/node.k8s.io/v1/runtimeclasses", runtime)
    specs = [fleet.NodeSpec(f"{POOL}-{i}", "Ascend310P3", 2, pool=POOL) for i in range(2)]
    fleet.create_nodes(kube, specs)
    path = tmp_path_factory.mktemp("pod-contract") / "dev.kubeconfig"
    yield User(control_plane, identity.kubeconfig(kube, identity.token(kube, USER), "dev", path))
    if policy(kube, NAME) is not None:
        delete_policy(kube, NAME)


def _meta(kind: str, name: str, api: str = "v1") -> Obj:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name}}


def _policy(contract: str = "Warn", scheduler: str = "Volcano", soft: bool = True) -> Obj:
    sched: dict[str, Any] = {"name": scheduler, "podContract": contract}
    sched["hami"] = {"version": "v2.10.0"}  # no scheduler Deployment here: versions declared
    if scheduler == "Volcano":
        sched["volcano"] = {"policy": "binpack", "weight": 10, "version": "v1.16.0"}
    return {
        "apiVersion": c.API_VERSION,
        "kind": "SharingPolicy",
        "metadata": {"name": NAME},
        "spec": {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: POOL}},
            "backend": "Exclusive",
            "ascend": {"softSlicing": soft},
            "scheduler": sched,
        },
    }


def _apply_policy(kube: Kube, body: Obj) -> None:
    current = policy(kube, NAME)
    if current is None:
        kube.create(SP, body)
    else:
        kube.patch(f"{SP}/{NAME}", {"spec": body["spec"]}, kind="merge")


def _pod(name: str, **changes: Any) -> Obj:
    """A pod with the full contract; ``changes`` drop (None) or replace its pieces."""
    pieces: dict[str, Any] = {
        "annotation": {"huawei.com/vnpu-mode": "hami-core"},
        "schedulerName": "volcano",
        "runtimeClassName": "ascend",
        "memory": "8192",
    }
    pieces.update(changes)
    limits = {"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": pieces["memory"]}
    spec: dict[str, Any] = {
        "containers": [{"name": "infer", "image": "infer:1", "resources": {"limits": limits}}]
    }
    for key in ("schedulerName", "runtimeClassName"):
        if pieces[key] is not None:
            spec[key] = pieces[key]
    meta: dict[str, Any] = {"name": name, "labels": {"app": name}}
    if pieces["annotation"] is not None:
        meta["annotations"] = pieces["annotation"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _deployment(pod: Obj) -> Obj:
    template = copy.deepcopy(pod)
    name = template["metadata"].pop("name")
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


def _answers(user: User, body: Obj, words: str) -> str:
    """Poll a dry run of ``body`` until the API server's answer holds ``words``."""

    def probe() -> str | None:
        done = user.apply(body, dry_run=True)
        return done.stderr if words in done.stderr else None

    return eventually(probe, 60, f"the API server to answer {body['kind']} with {words!r}")


def _objects(kube: Kube) -> tuple[Obj | None, Obj | None]:
    return (
        kube.get_or_none(f"{admission.POLICIES}/{VAP}"),
        kube.get_or_none(f"{admission.BINDINGS}/{VAP}"),
    )


def _guarded(kube: Kube, words: str = "") -> tuple[Obj, Obj]:
    """Both objects once the pass of the policy's current spec is over (status observed its
    generation, naming the VAP: the objects were synced to that spec before) and ``words``
    are in the VAP. Tests share one policy and may run in any order (``-n``), so an earlier
    test's objects are never taken for this spec's."""

    def probe() -> tuple[Obj, Obj] | None:
        vap, bound = _objects(kube)
        obj = policy(kube, NAME) or {"metadata": {}}
        found = obj.get("status") or {}
        seen = found.get("observedGeneration") == obj["metadata"].get("generation")
        named = (found.get("scheduler") or {}).get("admissionPolicy") == VAP
        if vap and bound and seen and named and words in json.dumps(vap["spec"]):
            return vap, bound
        return None

    return eventually(probe, 60, f"{VAP} and its binding for the current spec, named in status")


def test_full_contract_passes_and_a_missing_annotation_is_warned(kube: Kube, user: User) -> None:
    _apply_policy(kube, _policy("Warn"))
    vap, bound = _guarded(kube)
    assert vap["metadata"]["labels"][c.MANAGED_BY_LABEL] == c.MANAGED_BY_VALUE
    assert vap["metadata"]["annotations"][admission.DECLARED_BY] == f"SharingPolicy/{NAME}"
    assert bound["spec"]["validationActions"] == ["Warn"]
    bare = _pod("no-mode", annotation=None)
    _answers(user, bare, MISSING_ANNOTATION)

    # an earlier test's spec may still be in the API server's admission for a moment
    quiet = lambda: "Warning" not in user.apply(_pod("full"), dry_run=True).stderr  # noqa: E731
    eventually(quiet, 60, "the full contract to pass the current spec's policy")
    full = user.apply(_deployment(_pod("full")))
    assert full.returncode == 0, full.stderr
    assert "Warning" not in full.stderr, full.stderr
    full = user.apply(_pod("full-pod"))
    assert full.returncode == 0 and "Warning" not in full.stderr, full.stderr

    warned = user.apply(_deployment(bare))
    assert warned.returncode == 0, warned.stderr
    assert f"Warning: Validation failed for ValidatingAdmissionPolicy '{VAP}'" in warned.stderr
    assert MISSING_ANNOTATION in warned.stderr, warned.stderr
    assert "schedulerName" not in warned.stderr and "runtimeClassName" not in warned.stderr
    assert kube.get_or_none(path_of("apps/v1", "deployments", "no-mode", WORK)) is not None

    in_gib = user.apply(_pod("gib", memory="16Gi"))
    assert in_gib.returncode == 0, in_gib.stderr
    assert "container infer requests huawei.com/Ascend310P-memory: 16Gi" in in_gib.stderr
    assert "in MB" in in_gib.stderr, in_gib.stderr


def test_a_pod_of_many_containers_stays_within_budget_and_message_size(
    kube: Kube, user: User
) -> None:
    """The API server bounds a CEL evaluation's cost and a message's length: a pod of 120
    containers (and 60 init containers) all asking 16Gi is still checked, and the warning
    names the first and counts the others."""
    _apply_policy(kube, _policy("Warn"))
    _guarded(kube)
    big = _pod("many", memory="16Gi")
    one = big["spec"]["containers"][0]
    big["spec"]["containers"] = [{**one, "name": f"c{i}"} for i in range(120)]
    big["spec"]["initContainers"] = [{**one, "name": f"i{i}"} for i in range(60)]
    stderr = _answers(user, big, "in MB")
    assert "container c0 requests huawei.com/Ascend310P-memory: 16Gi (and 179 more)" in stderr
    assert "failed expression" not in stderr, stderr


def test_a_workload_update_is_checked_only_when_its_pod_template_changes(
    kube: Kube, user: User
) -> None:
    """Scaling a Deployment admitted with a warning says nothing more; changing its pod
    template is checked again."""
    _apply_policy(kube, _policy("Warn"))
    _guarded(kube)
    app = _deployment(_pod("scaled", annotation=None))
    _answers(user, app, MISSING_ANNOTATION)
    first = user.apply(app)
    assert first.returncode == 0 and MISSING_ANNOTATION in first.stderr, first.stderr
    app["spec"]["replicas"] = 2
    scaled = user.apply(app)
    assert scaled.returncode == 0 and "configured" in scaled.stdout, scaled.stdout
    assert "Warning" not in scaled.stderr, scaled.stderr
    app["spec"]["template"]["metadata"]["labels"]["tier"] = "gold"
    changed = user.apply(app)
    assert changed.returncode == 0 and MISSING_ANNOTATION in changed.stderr, changed.stderr


def test_deny_refuses_the_pod_naming_the_missing_piece(kube: Kube, user: User) -> None:
    _apply_policy(kube, _policy("Deny"))
    eventually(
        lambda: (_objects(kube)[1] or {}).get("spec", {}).get("validationActions") == ["Deny"],
        60,
        "the binding to deny",
    )
    plain = _pod("plain-runtime", runtimeClassName=None)
    _answers(user, plain, "denied request")
    refused = user.apply(plain)
    assert refused.returncode != 0
    assert "runtimeClassName is unset" in refused.stderr, refused.stderr
    assert "need runtimeClassName: ascend" in refused.stderr, refused.stderr
    assert kube.get_or_none(path_of("v1", "pods", "plain-runtime", WORK)) is None
    admitted = user.apply(_pod("full-denied"))
    assert admitted.returncode == 0 and "Warning" not in admitted.stderr, admitted.stderr


def test_changing_the_policy_updates_the_admission_policy(kube: Kube, user: User) -> None:
    _apply_policy(kube, _policy("Warn"))
    before = _guarded(kube)[0]["metadata"]["resourceVersion"]
    patch = {"spec": {"scheduler": {"name": "HAMi", "volcano": None}}}
    kube.patch(f"{SP}/{NAME}", patch, kind="merge")

    def rewritten() -> Obj | None:
        vap = _objects(kube)[0]
        changed = vap and vap["metadata"]["resourceVersion"] != before
        return vap if changed and "hami-scheduler" in yaml.safe_dump(vap["spec"]) else None

    vap = eventually(rewritten, 60, f"{VAP} to ask for schedulerName hami-scheduler")
    assert "'volcano'" not in yaml.safe_dump(vap["spec"])
    stderr = _answers(user, _pod("on-volcano"), "need schedulerName: hami-scheduler")
    assert "schedulerName is 'volcano'" in stderr


def test_a_deleted_binding_is_restored_and_off_removes_both(kube: Kube, user: User) -> None:
    _apply_policy(kube, _policy("Warn"))
    # the previous test left HAMi's objects: wait for this spec's pass before deleting
    _guarded(kube, "need schedulerName: volcano")
    kube.delete(f"{admission.BINDINGS}/{VAP}")
    eventually(lambda: _objects(kube)[1], 60, "the binding deleted by hand to be restored")
    kube.patch(f"{SP}/{NAME}", {"spec": {"scheduler": {"podContract": "Off"}}}, kind="merge")
    eventually(lambda: _objects(kube) == (None, None), 60, f"{VAP} and binding removed")

    def unnamed() -> bool:  # status is written at the end of the pass that deleted them
        obj = policy(kube, NAME) or {"metadata": {}}
        found = obj.get("status") or {}
        seen = found.get("observedGeneration") == obj["metadata"].get("generation")
        return seen and not (found.get("scheduler") or {}).get("admissionPolicy")

    eventually(unnamed, 60, "status.scheduler.admissionPolicy cleared")
    bare = _pod("off", annotation=None)
    eventually(lambda: "Warning" not in user.apply(bare, dry_run=True).stderr, 60, "no warning")
    quiet = user.apply(bare)
    assert quiet.returncode == 0 and "Warning" not in quiet.stderr, quiet.stderr


def test_deleting_the_policy_removes_policy_and_binding(kube: Kube, user: User) -> None:
    _apply_policy(kube, _policy("Warn"))
    _guarded(kube)
    delete_policy(kube, NAME)
    eventually(lambda: _objects(kube) == (None, None), 60, f"{VAP} and binding removed")


def test_a_same_named_policy_tessera_does_not_own_is_left_alone(kube: Kube, user: User) -> None:
    if policy(kube, NAME) is not None:  # an earlier test's (any order): its objects go with it
        delete_policy(kube, NAME)
    eventually(lambda: _objects(kube) == (None, None), 60, f"no {VAP} left")
    theirs = {
        **_meta("ValidatingAdmissionPolicy", VAP, admission.API),
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "validations": [{"expression": "true"}],
        },
    }
    kube.create(admission.POLICIES, theirs)
    try:
        _apply_policy(kube, _policy("Warn"))

        warning = eventually(
            lambda: event_with(kube, NAME, "Conflict", f"ValidatingAdmissionPolicy {VAP}"),
            60,
            "a Conflict Event naming the object Tessera does not own",
        )
        assert "not Tessera's" in warning and "not enforced" in warning, warning
        vap = _objects(kube)[0]
        assert vap is not None and not (vap["metadata"].get("labels") or {})
        assert vap["spec"]["validations"] == [{"expression": "true"}]
        assert _objects(kube)[1] is None, "no binding for an object Tessera does not own"
        delete_policy(kube, NAME)
        assert _objects(kube)[0] is not None, "the object Tessera does not own stays"
    finally:
        kube.delete(f"{admission.POLICIES}/{VAP}")


def test_nvidia_slices_under_volcano_are_guarded_and_whole_gpus_are_not(
    kube: Kube, user: User
) -> None:
    """backend HAMiCore scheduled by Volcano: a pod asking ``volcano.sh/vgpu-memory`` without
    ``schedulerName: volcano`` is warned; one asking only ``nvidia.com/gpu`` (a whole GPU of
    any pool) is not checked at all."""
    name = "pc-gpu"
    body = {
        "apiVersion": c.API_VERSION,
        "kind": "SharingPolicy",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: "pc-no-gpus"}},
            "backend": "HAMiCore",
            "hamiCore": {"deviceSplitCount": 4},
            "scheduler": {
                "name": "Volcano",
                "hami": {"version": "v2.10.0"},
                "volcano": {"version": "v1.16.0"},
            },
        },
    }
    kube.create(SP, body)
    try:
        target = admission.name_of(name)
        eventually(
            lambda: kube.get_or_none(f"{admission.BINDINGS}/{target}"), 60, f"{target} bound"
        )
        limits = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "4096"}
        vgpu = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "vgpu"},
            "spec": {
                "containers": [{"name": "t", "image": "t:1", "resources": {"limits": limits}}]
            },
        }
        stderr = _answers(user, vgpu, f"SharingPolicy {name} need schedulerName: volcano")
        assert "schedulerName is 'default-scheduler'" in stderr
        assert "runtimeClassName" not in stderr and "vnpu-mode" not in stderr, stderr
        whole = copy.deepcopy(vgpu)
        whole["metadata"]["name"] = "whole"
        whole["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        done = user.apply(whole)
        assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr
    finally:
        delete_policy(kube, name)


def test_plan_lists_the_pod_contract_writes(
    kube: Kube, user: User, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """``tessera plan`` says what the operator will write: a create before the policy exists,
    nothing once it is guarded, the binding's update when the policy turns to Deny. The
    schedulers the policy names are installed: without them the plan cannot answer (exit 1)."""
    if policy(kube, NAME) is not None:
        delete_policy(kube, NAME)
    schedulers.install_hami(kube)
    schedulers.install_volcano(kube)
    try:
        _plan_story(kube, control_plane, tmp_path)
    finally:
        if policy(kube, NAME) is not None:
            delete_policy(kube, NAME)
        schedulers.uninstall(kube)


def _plan_story(kube: Kube, control_plane: ControlPlane, tmp_path: Path) -> None:
    manifest = tmp_path / "policy.yaml"
    manifest.write_text(yaml.safe_dump(_policy("Warn")))
    code, doc, text = plan(control_plane.kubeconfig, manifest)
    assert code == 2, text
    assert [(w["action"], w["kind"]) for w in doc["admission"]] == [
        ("create", "ValidatingAdmissionPolicy"),
        ("create", "ValidatingAdmissionPolicyBinding"),
    ]
    assert f"+ create ValidatingAdmissionPolicy {VAP} (Warn: pods requesting" in text, text

    _apply_policy(kube, _policy("Warn"))
    _guarded(kube)
    code, doc, text = plan(control_plane.kubeconfig, manifest)
    assert doc["admission"] == [] and "Pod contracts" not in text, text

    manifest.write_text(yaml.safe_dump(_policy("Deny")))
    code, doc, text = plan(control_plane.kubeconfig, manifest)
    assert code == 2, text
    assert [(w["action"], w["kind"]) for w in doc["admission"]] == [
        ("update", "ValidatingAdmissionPolicyBinding")
    ]
    assert f"~ update ValidatingAdmissionPolicyBinding {VAP} (Deny: " in text, text
