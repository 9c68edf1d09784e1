"""The device-plugin ConfigMap: keys before labels, a default key, safe deletion, drift."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from sharing_builders import gpu_node

from tessera.domain.sharing import configmap
from tessera.domain.sharing.configmap import DEFAULT_CONTENT, ConfigMapRef, Target

REF = ConfigMapRef()
TS = "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}\n"


def test_defaults_match_the_gpu_operator() -> None:
    assert (REF.namespace, REF.name, REF.default_key) == (
        "gpu-operator",
        "device-plugin-configs",
        "default",
    )


def test_first_pass_writes_keys_then_labels() -> None:
    nodes = [gpu_node("n1"), gpu_node("n2")]
    got = configmap.plan(
        REF,
        None,
        managed=frozenset(),
        contents={"p-aaaaaa": TS},
        nodes=nodes,
        targets={"n1": Target("p-aaaaaa", "p"), "n2": Target("p-aaaaaa", "p")},
    )
    assert dict(got.put) == {"default": DEFAULT_CONTENT, "p-aaaaaa": TS}
    assert [(c.node, c.new, c.owned) for c in got.labels] == [
        ("n1", "p-aaaaaa", True),
        ("n2", "p-aaaaaa", True),
    ]
    assert got.managed == {"default", "p-aaaaaa"}
    assert got.data_patch() == {
        "metadata": {"annotations": {"tessera.io/managed-keys": "default,p-aaaaaa"}},
        "data": {"default": DEFAULT_CONTENT, "p-aaaaaa": TS},
    }
    assert got.labels[0].patch() == {
        "metadata": {
            "labels": {"nvidia.com/device-plugin.config": "p-aaaaaa"},
            "annotations": {"tessera.io/device-plugin-config": "p-aaaaaa"},
        }
    }


def test_converged_cluster_gets_zero_writes() -> None:
    data = {"default": DEFAULT_CONTENT, "p-aaaaaa": TS}
    nodes = [gpu_node("n1", config="p-aaaaaa", applied="p-aaaaaa")]
    got = configmap.plan(
        REF,
        data,
        managed=frozenset(data),
        contents={"p-aaaaaa": TS},
        nodes=nodes,
        targets={"n1": Target("p-aaaaaa", "p")},
    )
    assert got.converged and got.notes == ()


def test_old_key_is_deleted_only_after_no_node_points_at_it() -> None:
    data = {"default": DEFAULT_CONTENT, "p-old000": TS, "p-new000": TS + "#"}
    managed = frozenset(data)
    nodes = [gpu_node("n1", config="p-old000", applied="p-old000")]
    moving = configmap.plan(
        REF,
        data,
        managed=managed,
        contents={"p-new000": TS + "#"},
        nodes=nodes,
        targets={"n1": Target("p-new000", "p")},
    )
    assert moving.delete == () and moving.delete_after_labels == ("p-old000",)
    assert moving.cleanup_patch()["data"] == {"p-old000": None}
    moved = [gpu_node("n1", config="p-new000", applied="p-new000")]
    after = configmap.plan(
        REF,
        data,
        managed=managed,
        contents={"p-new000": TS + "#"},
        nodes=moved,
        targets={"n1": Target("p-new000", "p")},
    )
    assert after.delete == ("p-old000",) and after.labels == ()
    assert "deleted key p-old000 from gpu-operator/device-plugin-configs: no node uses it" in [
        n.message for n in after.notes
    ]


def test_keys_written_by_people_are_never_touched() -> None:
    data = {"default": "version: v1\nflags: {migStrategy: none}\n", "mine": TS}
    got = configmap.plan(
        REF,
        data,
        managed=frozenset(),
        contents={},
        nodes=[gpu_node("n1", config="mine")],
        targets={},
    )
    assert got.converged and got.put == {}


def test_release_points_node_at_default_and_drops_the_record() -> None:
    data = {"default": DEFAULT_CONTENT, "p-aaaaaa": TS}
    nodes = [gpu_node("n1", config="p-aaaaaa", applied="p-aaaaaa")]
    got = configmap.plan(
        REF,
        data,
        managed=frozenset(data),
        contents={},
        nodes=nodes,
        targets={"n1": Target("default")},
    )
    [change] = got.labels
    assert (change.new, change.owned) == ("default", False)
    assert change.patch()["metadata"]["annotations"] == {"tessera.io/device-plugin-config": None}
    assert got.delete_after_labels == ("p-aaaaaa",) and "default" not in got.delete


def test_hand_edits_are_restored_with_messages() -> None:
    data = {"default": DEFAULT_CONTENT, "p-aaaaaa": TS.replace("4", "8")}
    nodes = [gpu_node("n1", config="other", applied="p-aaaaaa"), gpu_node("n2", applied="p-aaaaaa")]
    got = configmap.plan(
        REF,
        data,
        managed=frozenset({"default", "p-aaaaaa", "p-gone00"}),
        contents={"p-aaaaaa": TS},
        nodes=nodes,
        targets={"n1": Target("p-aaaaaa", "p"), "n2": Target("p-aaaaaa", "p")},
    )
    assert [n.message for n in got.notes if n.restores] == [
        "restored key p-aaaaaa in gpu-operator/device-plugin-configs edited by hand",
        "restored label nvidia.com/device-plugin.config=p-aaaaaa on node n1 (changed to other by hand)",
        "restored label nvidia.com/device-plugin.config=p-aaaaaa on node n2 (removed by hand)",
    ]


def test_restores_a_deleted_key() -> None:
    got = configmap.plan(
        REF,
        {"default": DEFAULT_CONTENT},
        managed=frozenset({"default", "p-aaaaaa"}),
        contents={"p-aaaaaa": TS},
        nodes=[],
        targets={},
    )
    assert [n.message for n in got.notes] == [
        "restored key p-aaaaaa in gpu-operator/device-plugin-configs deleted by hand"
    ]


KEYS = st.sampled_from(["default", "k1", "k2", "k3", "human"])


@given(
    data_keys=st.sets(KEYS),
    managed=st.sets(KEYS),
    wanted=st.sets(st.sampled_from(["k1", "k2", "k3"])),
    labels=st.lists(st.one_of(st.none(), KEYS), min_size=0, max_size=6),
    moves=st.lists(
        st.one_of(st.none(), st.sampled_from(["k1", "k2", "k3", "default"])), max_size=6
    ),
)
def test_no_label_ever_names_a_missing_key(
    data_keys: set[str],
    managed: set[str],
    wanted: set[str],
    labels: list[str | None],
    moves: list[str | None],
) -> None:
    data = {k: f"content {k}\n" for k in data_keys}
    nodes = [gpu_node(f"n{i}", config=label) for i, label in enumerate(labels)]
    targets = {
        f"n{i}": Target(k, "p") for i, k in enumerate(moves) if k is not None and i < len(nodes)
    }
    got = configmap.plan(
        REF,
        data,
        managed=frozenset(managed),
        contents={k: f"v {k}\n" for k in wanted},
        nodes=nodes,
        targets=targets,
    )
    after_write = (set(data) | set(got.put)) - set(got.delete)
    assert {c.new for c in got.labels} <= after_write  # labels move only onto existing keys
    assert REF.default_key in after_write  # a default key always exists
    pointed_now = {n.plugin_config for n in nodes} - {None}
    assert not pointed_now & set(got.delete)  # nothing in use is deleted
    assert set(got.delete) | set(got.delete_after_labels) <= managed  # only Tessera's keys go
    final = after_write - set(got.delete_after_labels)
    labels_after = {c.node: c.new for c in got.labels}
    for node in nodes:
        label = labels_after.get(node.name, node.plugin_config)
        if label is not None and label in after_write:
            assert label in final
