"""Whole reconciles against a small in-memory cluster: converge, drift, conflicts, rollout, status."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import jsonpatch
from sharing_builders import gpu_node, npu_node, policy

from tessera.domain.schedulers.hami import nodes as hami
from tessera.domain.sharing import nodes, planning, status
from tessera.domain.sharing.assignment import Policy
from tessera.domain.sharing.nodes import NodeFacts


@dataclass
class World:
    """Applies plans the way the controller will: keys, labels, cleanup, HAMi patches."""

    nodes: dict[str, NodeFacts]
    data: dict[str, str] = field(default_factory=dict)
    map_exists: bool = False  # the device-plugin ConfigMap; its first write creates it
    annotations: dict[str, str] = field(default_factory=dict)
    nvidia: dict[str, Any] = field(default_factory=dict)
    nvidia_managed: dict[str, str] = field(default_factory=dict)
    ascend: dict[str, Any] = field(default_factory=dict)
    ascend_managed: dict[str, str] = field(default_factory=dict)

    def observe(self) -> planning.SharingObserved:
        return planning.SharingObserved(
            tuple(self.nodes.values()), self.data if self.map_exists else None, self.annotations,
            self.nvidia, self.nvidia_managed, self.ascend, self.ascend_managed,
        )  # fmt: skip

    def apply(self, plan: planning.SharingPlan) -> int:
        writes = 0
        cm = plan.device_plugin
        if cm.writes_config_map:
            self._merge(cm.data_patch())
            writes += 1
        for change in cm.labels:
            node = self.nodes[change.node]
            meta = change.patch()["metadata"]
            labels = {**node.labels, **meta["labels"]}
            notes = {k: v for k, v in {**node.annotations, **meta["annotations"]}.items() if v}
            self.nodes[change.node] = nodes.from_node(
                node.name, labels, notes, npus=node.npus, npu_resource=node.npu_resource
            )
            writes += 1
        if cm.delete_after_labels:
            self._merge(cm.cleanup_patch())
            writes += 1
        for doc, managed, entries in (
            (self.nvidia, self.nvidia_managed, plan.hami_nvidia),
            (self.ascend, self.ascend_managed, plan.hami_ascend),
        ):
            if entries.patch or dict(entries.managed) != managed:
                patched = jsonpatch.apply_patch(doc, list(entries.patch))
                assert patched == entries.document  # the patch is the whole story
                doc.clear()
                doc.update(patched)
                managed.clear()
                managed.update(entries.managed)
                writes += 1
        return writes

    def _merge(self, patch: dict[str, Any]) -> None:
        self.map_exists = True
        for key, value in patch["data"].items():
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value
        self.annotations.update(patch["metadata"]["annotations"])

    def converge(
        self, policies: list[Policy], cleared: frozenset[str] = frozenset()
    ) -> planning.SharingPlan:
        for _ in range(5):
            plan = planning.plan(policies, self.observe(), cleared=cleared)
            if self.apply(plan) == 0:
                return plan
        raise AssertionError("did not converge in 5 passes")


def world(*members: NodeFacts) -> World:
    return World({n.name: n for n in members})


def test_time_slicing_converges_then_writes_nothing() -> None:
    w = world(gpu_node("n1", gpus=8), gpu_node("n2", gpus=4), gpu_node("other", pool="b"))
    ts = policy("h100-ts", timeSlicing={"replicas": 4})
    first = planning.plan([ts], w.observe())
    key = first.results["h100-ts"].key
    assert key is not None and set(first.device_plugin.put) == {"default", key}
    assert [c.node for c in first.device_plugin.labels] == ["n1", "n2"]
    plan = w.converge([ts])
    assert plan.restorations == () and w.nodes["n1"].plugin_config == key
    assert "nvidia.com/device-plugin.config" not in w.nodes["other"].labels
    got = status.summarize(plan, "h100-ts", w.nodes.values())
    assert (got.matched, got.applied, got.conflicted) == (2, 2, 0)
    assert dict(got.advertised) == {"nvidia.com/gpu": "48"}
    assert got.verdict.state == "ready" and got.config_key == key


def test_replicas_change_moves_to_a_new_key_in_place_and_deletes_the_old() -> None:
    w = world(*(gpu_node(f"n{i:02}") for i in range(10)))
    w.converge([policy("p", timeSlicing={"replicas": 4})])
    old = w.nodes["n00"].plugin_config
    raised = policy("p", timeSlicing={"replicas": 8})
    plan = planning.plan([raised], w.observe())
    assert len(plan.changes) == 10 and not plan.awaiting_rollout
    assert all(c.kind == "in-place" for c in plan.changes.values())
    assert plan.device_plugin.delete_after_labels == (old,)
    w.converge([raised])
    assert old not in w.data and all(n.plugin_config != old for n in w.nodes.values())


def test_backend_switch_waits_for_the_rollout() -> None:
    w = world(gpu_node("n1"))
    w.converge([policy("p", "MPS")], cleared=frozenset({"n1"}))
    mps_key = w.nodes["n1"].plugin_config
    ts = policy("p", timeSlicing={"replicas": 4})
    plan = planning.plan([ts], w.observe())
    assert plan.device_plugin.labels == () and plan.awaiting_rollout["n1"].disruptive
    got = status.summarize(plan, "p", w.nodes.values())
    assert got.verdict.state == "progressing" and "cordon/drain rollout" in got.verdict.message
    w.converge([ts], cleared=frozenset({"n1"}))
    assert w.nodes["n1"].plugin_config not in (None, mps_key)


def test_equal_priority_holds_nodes_at_their_config() -> None:
    w = world(gpu_node("n1"))
    w.converge([policy("a")])
    before = w.nodes["n1"].plugin_config
    plan = w.converge([policy("a"), policy("b", "MPS")])
    assert w.nodes["n1"].plugin_config == before
    verdict = status.summarize(plan, "b", w.nodes.values()).verdict
    assert (verdict.state, verdict.reason) == ("stalled", "Conflict")
    assert "sharingpolicy/a and sharingpolicy/b" in verdict.message and "n1" in verdict.message


def test_mps_on_a_mig_node_is_refused_for_that_node_only() -> None:
    w = world(gpu_node("plain"), gpu_node("mig", labels={"nvidia.com/mig.strategy": "mixed"}))
    plan = w.converge([policy("p", "MPS")], cleared=frozenset({"plain", "mig"}))
    assert w.nodes["plain"].plugin_config is not None
    assert "nvidia.com/device-plugin.config" not in w.nodes["mig"].labels
    got = status.summarize(plan, "p", w.nodes.values())
    assert got.verdict.state == "stalled" and "node mig: spec.backend" in got.verdict.message
    assert (got.matched, got.applied) == (2, 1)


def test_drift_is_restored_with_messages_then_quiet() -> None:
    w = world(gpu_node("n1"))
    ts = policy("p")
    w.converge([ts])
    key = w.nodes["n1"].plugin_config
    assert key is not None
    w.data[key] = w.data[key].replace("4", "9")
    n1 = w.nodes["n1"]
    w.nodes["n1"] = nodes.from_node(
        "n1", {**n1.labels, "nvidia.com/device-plugin.config": "default"}, n1.annotations
    )
    plan = planning.plan([ts], w.observe())
    assert plan.restorations == (
        f"restored key {key} in gpu-operator/device-plugin-configs edited by hand",
        f"restored label nvidia.com/device-plugin.config={key} on node n1 (changed to default by hand)",
    )
    assert w.converge([ts]).restorations == ()


def test_deleting_the_policy_returns_nodes_to_default_and_removes_only_tessera_keys() -> None:
    w = world(gpu_node("n1"))
    w.data["mine"] = "version: v1\n"
    w.converge([policy("p")])
    w.converge([])
    assert w.nodes["n1"].plugin_config == "default" and w.nodes["n1"].applied_config is None
    assert set(w.data) == {"default", "mine"}


def test_hami_core_with_mps_mode_and_ascend_soft_slicing() -> None:
    w = world(gpu_node("g1", gpus=2), npu_node("a1", npus=4))
    w.nvidia = {"nodeconfig": [{"name": "g9", "operatingmode": "mig"}]}
    p = policy(
        "h",
        "HAMiCore",
        hamiCore={"mode": "MPS", "deviceSplitCount": 5},
        ascend={"softSlicing": True, "vDeviceCount": 7},
    )
    first = planning.plan([p], w.observe())
    assert set(first.awaiting_rollout) == {"g1"}  # whole GPUs -> HAMi-core: another plugin
    plan = w.converge([p], cleared=frozenset({"g1"}))
    entries = {e["name"]: e for e in w.nvidia["nodeconfig"]}
    assert entries["g1"]["operatingmode"] == "hami-core" and entries["g9"] == {
        "name": "g9",
        "operatingmode": "mig",
    }
    assert w.ascend == {"nodes": [{"name": "a1", "hami-vnpu-core": True, "vDeviceCount": 7}]}
    got = status.summarize(plan, "h", w.nodes.values())
    assert dict(got.advertised) == {"huawei.com/Ascend310P": "28"}  # HAMi's plugin: not yet
    assert (got.verdict.state, got.applied) == ("progressing", 1)
    assert "node g1 advertises 0 nvidia.com/gpu, want 10" in got.verdict.message
    w.nodes["g1"] = replace(w.nodes["g1"], allocatable={"nvidia.com/gpu": 10})  # it registered
    got = status.summarize(plan, "h", w.nodes.values())
    assert dict(got.advertised) == {"huawei.com/Ascend310P": "28", "nvidia.com/gpu": "10"}
    assert (got.verdict.state, got.applied) == ("ready", 2)
    [(kind, flag, reason, message)] = got.verdict.extra
    assert (kind, flag, reason) == (
        "BackendFallback",
        "True",
        "HAMiHasNoMPS",
    ) and "no MPS code path" in message
    w.converge([], cleared=frozenset({"g1"}))
    assert w.nvidia == {"nodeconfig": [{"name": "g9", "operatingmode": "mig"}]} and w.ascend == {
        "nodes": []
    }
    assert hami.managed_annotation(w.nvidia_managed) == ""


def test_ascend_only_cluster_plans_no_device_plugin_map_until_a_gpu_node_joins() -> None:
    w = world(npu_node("a1", npus=4))
    p = policy("h", "HAMiCore", hamiCore={"mode": "TimeSlicing"}, ascend={"softSlicing": True})
    plan = w.converge([p])
    assert plan.device_plugin.converged and w.data == {} and w.annotations == {}
    assert w.ascend["nodes"][0]["name"] == "a1"  # HAMi's Ascend entries still written
    w.nodes["g1"] = gpu_node("g1")
    w.converge([p], cleared=frozenset({"g1"}))
    assert "default" in w.data  # the GPU Operator can read the map from now on
    assert [e["name"] for e in w.nvidia["nodeconfig"]] == ["g1"]


def test_invalid_policy_is_stalled_and_touches_nothing() -> None:
    w = world(gpu_node("n1"))
    bad = policy("p", "MPS", mps=None)
    plan = w.converge([bad])
    got = status.summarize(plan, "p", w.nodes.values())
    assert (got.verdict.state, got.verdict.reason) == ("stalled", "InvalidSpec")
    assert got.verdict.message == "spec.mps: must be set when backend is MPS"
    assert "nvidia.com/device-plugin.config" not in w.nodes["n1"].labels


def test_mixed_mig_capacity_is_summed_with_replicas() -> None:
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-1g.10gb.count": "14",
        "nvidia.com/mig-3g.40gb.count": "4",
    }
    w = world(gpu_node("m1", gpus=0, labels=labels))
    p = policy(
        "p",
        timeSlicing={
            "renameByDefault": True,
            "resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}],
        },
    )
    plan = w.converge([p])
    got = status.summarize(plan, "p", w.nodes.values())
    assert dict(got.advertised) == {
        "nvidia.com/mig-1g.10gb.shared": "28",
        "nvidia.com/mig-3g.40gb": "4",
    }


def test_every_note_names_the_policy_whose_plan_made_the_write() -> None:
    """One pass plans every policy; each write's note says whose it is (issue 13, item 12)."""
    w = world(gpu_node("t1", pool="ts"), gpu_node("h1", pool="hami"))
    ts = policy("notebooks-ts", pool="ts")
    hc = policy("hami-a10", "HAMiCore", pool="hami")
    plan = planning.plan([ts, hc], w.observe(), cleared=frozenset({"h1"}))
    key = plan.results["notebooks-ts"].key
    by = {n.message: n.policy for n in plan.notes}
    assert by[f"added key {key} to gpu-operator/device-plugin-configs"] == "notebooks-ts"
    assert by["added key default to gpu-operator/device-plugin-configs"] is None
    [label] = [m for m in by if m.startswith("set nvidia.com/device-plugin.config")]
    assert "node t1" in label and by[label] == "notebooks-ts"
    [entry] = [m for m in by if "for node h1 in" in m]
    assert by[entry] == "hami-a10"
    w.converge([ts, hc], cleared=frozenset({"h1"}))
    elsewhere = policy("notebooks-ts", pool="elsewhere")  # its selector no longer takes t1
    release = planning.plan([elsewhere, hc], w.observe(), cleared=frozenset({"h1"}))
    [note] = [n for n in release.notes if n.action == "release"]
    assert "node t1" in note.message and note.policy == "notebooks-ts"
    gone = planning.plan([hc], w.observe(), cleared=frozenset({"h1"}))
    [note] = [n for n in gone.notes if n.action == "release"]
    assert note.policy is None  # a deleted policy's releases: its finalizer names it


def test_a_policy_whose_selector_matches_no_node_is_stalled_not_applied() -> None:
    w = world(gpu_node("n1", pool="a"))
    typo = policy("typo", pool="ab")
    plan = w.converge([policy("p"), typo])
    got = status.summarize(plan, "typo", w.nodes.values())
    assert (got.verdict.state, got.verdict.reason) == ("stalled", "NoNodes")
    assert "matches no node" in got.verdict.message and got.matched == 0


def test_a_policy_outranked_on_every_node_it_selects_is_no_typo() -> None:
    w = world(gpu_node("n1"))
    plan = w.converge([policy("low"), policy("high", "MPS", priority=1)])
    got = status.summarize(plan, "low", w.nodes.values())
    assert (got.verdict.state, got.matched) == ("ready", 0)  # priorities at work, as meant
