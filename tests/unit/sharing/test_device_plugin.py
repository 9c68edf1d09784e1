"""Device-plugin config v1: golden output per backend, the plugin's own rules, keys."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from sharing_builders import check_golden, gpu_node, policy

from tessera.domain.sharing import device_plugin, node_rules, parsing
from tessera.domain.sharing.device_plugin import DevicePluginConfig, Replicated

# The schema as far as Tessera writes it: docs/facts/nvidia.md §Sharing in the device-plugin config
BLOCK_KEYS = {"renameByDefault", "failRequestsGreaterThanOne", "resources"}


def assert_plugin_format(text: str) -> None:
    """What the plugin parses: version v1, at most one sharing block, honoured fields only."""
    doc: dict[str, Any] = yaml.safe_load(text)
    assert doc["version"] == "v1"
    assert set(doc) <= {"version", "flags", "sharing"}
    sharing = doc.get("sharing", {})
    assert len(sharing) <= 1 and set(sharing) <= {"timeSlicing", "mps"}
    for block in sharing.values():
        assert set(block) <= BLOCK_KEYS and block["resources"]
        for r in block["resources"]:
            assert set(r) == {"name", "replicas"} and r["replicas"] >= 2
            assert r["name"].startswith("nvidia.com/") and len(r["name"]) <= 63
    if "mps" in sharing:
        assert doc["flags"] == {"mpsRoot": "/run/nvidia/mps"}
        assert all(r["name"] == "nvidia.com/gpu" for r in sharing["mps"]["resources"])


CASES = {
    "exclusive.yaml": policy("p", "Exclusive"),
    "timeslicing.yaml": policy("p", timeSlicing={"replicas": 4}),
    "timeslicing-renamed.yaml": policy(
        "p",
        timeSlicing={"replicas": 10, "renameByDefault": True, "failRequestsGreaterThanOne": False},
    ),
    "timeslicing-mig.yaml": policy(
        "p",
        timeSlicing={
            "resources": [
                {"name": "nvidia.com/mig-2g.20gb", "replicas": 3},
                {"name": "nvidia.com/mig-1g.10gb", "replicas": 2},
            ]
        },
    ),
    "mps.yaml": policy("p", "MPS", mps={"replicas": 4}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_config_matches_golden_and_plugin_format(name: str) -> None:
    config = device_plugin.from_spec(CASES[name].spec)
    assert config is not None and device_plugin.validate(config) == ()
    text = device_plugin.render(config)
    check_golden(f"device-plugin-{name}", text)
    assert_plugin_format(text)
    assert parsing.parse(text) == (config, ())


def test_hami_backend_has_no_device_plugin_config() -> None:
    assert device_plugin.from_spec(policy("p", "HAMiCore").spec) is None


@pytest.mark.parametrize(
    ("config", "field", "rule"),
    [
        pytest.param(
            DevicePluginConfig(
                "time-slicing", (Replicated("nvidia.com/gpu", 1, "spec.timeSlicing"),)
            ),
            "spec.timeSlicing.replicas",
            "must be >= 2 (got 1)",
            id="replicas-below-two",
        ),
        pytest.param(
            DevicePluginConfig(
                "mps", (Replicated("nvidia.com/gpu", 49, "spec.mps"),), mps_root="/r"
            ),
            "spec.mps.replicas",
            "MPS allows at most 48 clients per GPU (got 49)",
            id="mps-above-48",
        ),
        pytest.param(
            DevicePluginConfig(
                "mps", (Replicated("nvidia.com/mig-1g.10gb", 2, "x"),), mps_root="/r"
            ),
            "x.name",
            "MPS shares only full GPUs (nvidia.com/gpu)",
            id="mps-on-mig-resource",
        ),
        pytest.param(
            DevicePluginConfig("mps", (Replicated("nvidia.com/gpu", 2, "spec.mps"),)),
            "flags.mpsRoot",
            "MPS requires mpsRoot",
            id="mps-without-root",
        ),
        pytest.param(
            DevicePluginConfig("time-slicing", ()),
            "sharing.resources",
            "no resources specified",
            id="no-resources",
        ),
        pytest.param(
            DevicePluginConfig(
                "time-slicing",
                (Replicated("nvidia.com/gpu", 2, "a"), Replicated("nvidia.com/gpu", 3, "b")),
            ),
            "b.name",
            "nvidia.com/gpu is listed twice",
            id="duplicate-resource",
        ),
    ],
)
def test_plugin_rules_name_field_and_rule(
    config: DevicePluginConfig, field: str, rule: str
) -> None:
    errors = device_plugin.validate(config)
    assert [(e.field, e.rule) for e in errors] == [(field, rule)]


MPS4 = DevicePluginConfig("mps", (Replicated("nvidia.com/gpu", 4, "spec.mps"),), mps_root="/r")
MPS20 = DevicePluginConfig("mps", (Replicated("nvidia.com/gpu", 20, "spec.mps"),), mps_root="/r")
TS_MIG = DevicePluginConfig(
    "time-slicing", (Replicated("nvidia.com/mig-1g.10gb", 2, "spec.timeSlicing.resources[0]"),)
)


@pytest.mark.parametrize(
    ("config", "labels", "want"),
    [
        pytest.param(MPS4, {}, [], id="mps-on-whole-gpus"),
        pytest.param(
            MPS4,
            {"nvidia.com/mig.strategy": "mixed"},
            [
                "node n1: spec.backend: MPS is not supported with migStrategy mixed "
                "(nvidia.com/mig.strategy=mixed)"
            ],
            id="mps-under-mixed",
        ),
        pytest.param(
            MPS4,
            {
                "nvidia.com/mig.strategy": "single",
                "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
            },
            ["node n1: spec.backend: MPS is not supported on MIG devices"],
            id="mps-on-single-mig",
        ),
        pytest.param(
            MPS20,
            {"nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "0"},
            [
                "node n1: spec.mps.replicas: MPS allows at most 16 clients per GPU below compute "
                "capability 7.5 (this node has 7.0; got 20)"
            ],
            id="mps-volta-limit",
        ),
        pytest.param(
            MPS20,
            {"nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0"},
            [],
            id="mps-hopper",
        ),
        pytest.param(
            TS_MIG, {"nvidia.com/mig.strategy": "mixed"}, [], id="mig-resource-under-mixed"
        ),
        pytest.param(
            TS_MIG,
            {"nvidia.com/mig.strategy": "single"},
            [
                "node n1: spec.timeSlicing.resources[0].name: nvidia.com/mig-1g.10gb exists only "
                "under migStrategy mixed (this node has single; under single, MIG devices are "
                "nvidia.com/gpu)"
            ],
            id="mig-resource-under-single",
        ),
    ],
)
def test_node_dependent_rules_name_the_node(
    config: DevicePluginConfig, labels: dict[str, str], want: list[str]
) -> None:
    node = gpu_node("n1", labels=labels)
    assert [str(e) for e in node_rules.check(config, node)] == want


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("version: v2\n", "unknown version: v2"),
        (
            "version: v1\nsharing:\n  timeSlicing: {resources: [{name: gpu, replicas: 2}]}\n"
            "  mps: {resources: [{name: gpu, replicas: 2}]}\n",
            "never both timeSlicing and mps (the plugin would silently use mps)",
        ),
        ("sharing: {timeSlicing: {resources: []}}\n", "no resources specified"),
        ("sharing: {mps: {resources: [{name: gpu}]}}\n", "no replicas specified"),
    ],
)
def test_parse_refuses_what_the_plugin_would_misread(text: str, rule: str) -> None:
    config, errors = parsing.parse(text)
    assert config is None and [e.rule for e in errors] == [rule]


def test_parse_adds_the_nvidia_prefix_like_the_plugin() -> None:
    config, _ = parsing.parse("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2}]}}")
    assert config is not None and config.resources == (Replicated("nvidia.com/gpu", 2),)


def test_key_is_policy_and_content_hash() -> None:
    text = device_plugin.render(DevicePluginConfig())
    key = device_plugin.config_key("h100-ts", text)
    assert key.startswith("h100-ts-") and len(key) == len("h100-ts-") + 6
    assert key == device_plugin.config_key("h100-ts", text)
    assert key != device_plugin.config_key("h100-ts", text + "#")


def test_resource_order_does_not_change_the_key() -> None:
    resources = [
        {"name": "nvidia.com/gpu", "replicas": 2},
        {"name": "nvidia.com/mig-1g.10gb", "replicas": 3},
    ]
    keys = set()
    for order in (resources, list(reversed(resources))):
        config = device_plugin.from_spec(policy("p", timeSlicing={"resources": order}).spec)
        assert config is not None
        keys.add(device_plugin.config_key("p", device_plugin.render(config)))
    assert len(keys) == 1


@given(name=st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,250}[a-z0-9])?", fullmatch=True))
def test_key_is_a_valid_label_value_for_any_policy_name(name: str) -> None:
    key = device_plugin.config_key(name, "version: v1\n")
    assert len(key) <= 63 and key[0].isalnum() and key[-1].isalnum()
    assert all(ch.isalnum() or ch in "-._" for ch in key)


@given(
    strategy=st.sampled_from(["time-slicing", "mps"]),
    replicas=st.integers(2, 48),
    rename=st.booleans(),
    fail=st.one_of(st.none(), st.booleans()),
)
def test_render_then_parse_round_trips(
    strategy: str, replicas: int, rename: bool, fail: bool | None
) -> None:
    config = DevicePluginConfig(
        strategy,  # type: ignore[arg-type]
        (Replicated("nvidia.com/gpu", replicas),),
        rename,
        fail,
        "/run/nvidia/mps" if strategy == "mps" else None,
    )
    text = device_plugin.render(config)
    assert_plugin_format(text)
    assert parsing.parse(text) == (config, ())
    assert device_plugin.render(config) == text
