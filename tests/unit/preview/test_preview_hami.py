"""The HAMi part of ``tessera plan``: the operator's plan for ``hami-scheduler-device`` as a
diff, the restart it needs and traps as notes, and errors (exit 1) where it cannot answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from builders import NodeWrapper, SharingPolicyWrapper
from devcluster import fleet
from tessera.api import constants as c
from tessera.domain.preview import Cluster, preview
from tessera.domain.schedulers.hami.config import Want, plan
from tessera.domain.schedulers.hami.owned import Owned
from tessera.domain.schedulers.versions import Version

NOW = datetime(2026, 12, 2, tzinfo=UTC)
WHERE = "kube-system/hami-scheduler-device/device-config.yaml"
DEVICE = "nvidia:\n  deviceSplitCount: 10\nvnpus:\n  hamiVnpuCore: false\n  configs: []\n"
ENABLED = ["--enable-ascend=true"]


def _cluster(
    text: str | None = DEVICE, image: str | None = "projecthami/hami:v2.10.0", args: Any = ENABLED
) -> Cluster:
    node = NodeWrapper.simulated(fleet.NodeSpec("npu-0", "Ascend310P3", 2, pool="npu")).obj()
    items: list[dict[str, Any]] = [node]
    if text is not None:
        meta = {"name": "hami-scheduler-device", "namespace": "kube-system"}
        items.append(
            {"kind": "ConfigMap", "metadata": meta, "data": {c.HAMI_SCHEDULER_CONFIGMAP_KEY: text}}
        )
    if image is not None:
        container = {"name": "vgpu-scheduler-extender", "image": image, "args": args}
        spec = {"template": {"spec": {"containers": [container]}}}
        meta = {"name": "hami-scheduler", "namespace": "kube-system"}
        items.append({"kind": "Deployment", "metadata": meta, "spec": spec})
    return Cluster.of(items)


def _policy(name: str, soft: bool = True, **hami: Any) -> dict[str, Any]:
    scheduler = {"name": "HAMi", **({"hami": hami} if hami else {})}
    built = SharingPolicyWrapper(name).pool("npu").backend("Exclusive")
    return built.spec(ascend={"softSlicing": soft}, scheduler=scheduler).obj()


def _problems(p: Any, name: str) -> tuple[str, ...]:
    return next(o for o in p.objects if o.name == name).problems


def test_the_vnpus_entry_and_hami_vnpu_core_are_previewed_with_the_restart() -> None:
    p = preview(_cluster(), [_policy("a")], NOW)
    (diff,) = [d for d in p.configs if d.where == WHERE]
    assert "-  hamiVnpuCore: false" in diff.diff and "+  hamiVnpuCore: true" in diff.diff
    assert "+  - chipName: 310P3" in diff.diff or "+    - chipName: 310P3" in diff.diff
    assert any("rollout restart deployment/hami-scheduler" in n for n in _problems(p, "a"))
    assert not p.conflicts and p.changed


def test_without_enable_ascend_the_trap_is_noted() -> None:
    p = preview(_cluster(args=[]), [_policy("a")], NOW)
    assert any("without --enable-ascend" in n for n in _problems(p, "a"))


ERRORS = {
    "unknown version": (_cluster(image="projecthami/hami:latest"), "SchedulerVersionUnknown"),
    "no Deployment": (_cluster(image=None), "WaitingForScheduler"),
    "no map": (_cluster(text=None), "WaitingForScheduler"),
    "alias in vnpus": (_cluster(text="d: &d {aiCore: 8}\nvnpus: *d\n"), "SchedulerConfigInvalid"),
    "a kept entry HAMi refuses": (
        _cluster(text="vnpus:\n  configs:\n  - {chipName: 910B3, aiCore: '20'}\n"),
        "SchedulerConfigUnloadable: kube-system/hami-scheduler-device (device-config.yaml), "
        "line 3, column 31: HAMi v2.10.0's LoadConfig would fail: vnpus.configs[0].aiCore",
    ),
}


def test_what_the_operator_cannot_answer_is_an_error() -> None:
    for name, (cluster, reason) in ERRORS.items():
        p = preview(cluster, [_policy("a")], NOW)
        assert any(reason in x for x in p.conflicts), (name, p.conflicts)


def test_two_policies_wanting_different_hami_vnpu_core_are_errors_on_both() -> None:
    p = preview(_cluster(), [_policy("a", True), _policy("b", False)], NOW)
    # (their pod contracts contradict each other too: those lines say "would be Stalled")
    hami = [x for x in p.conflicts if "would be Stalled, reason Conflict" not in x]
    assert [x.split(":")[0] for x in hami] == ["SharingPolicy/a", "SharingPolicy/b"]
    assert all("Conflict" in x for x in hami)


def test_a_pruned_policy_previews_its_fields_going() -> None:
    """The map as the operator left it for policy ``a`` (its fields, their record); ``a``
    pruned: the diff gives the person's file back."""
    written = plan(DEVICE, Owned(), Want(Version(2, 10), ("310P3",), True))
    live = _cluster(written.text)
    for cm in live.configmaps:
        cm["metadata"]["annotations"] = {
            c.HAMI_SCHEDULER_MANAGED_ANNOTATION: written.owned.annotation()
        }
    live = Cluster.of([*live.items(), _policy("a")])
    p = preview(live, [], NOW, prune=True)
    (diff,) = [d for d in p.configs if d.where == WHERE]
    assert "-  hamiVnpuCore: true" in diff.diff and "+  hamiVnpuCore: false" in diff.diff
    assert "-  - chipName: 310P3" in diff.diff or "-    - chipName: 310P3" in diff.diff
