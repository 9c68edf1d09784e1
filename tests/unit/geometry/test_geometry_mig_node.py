import pytest
import yaml
from geometry_builders import layout

from tessera.domain.geometry import capacity, catalog, migparted
from tessera.domain.geometry.layouts import GeometryError

H100 = catalog.resolve("H100-80GB")
A100 = catalog.resolve("A100-80GB")
BALANCED = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}


@pytest.mark.parametrize(
    ("layouts", "strategy", "want"),
    [
        pytest.param(
            [layout("all", BALANCED), layout([7])],
            "mixed",
            {
                "nvidia.com/gpu": 1,
                "nvidia.com/mig-1g.10gb": 14,
                "nvidia.com/mig-2g.20gb": 7,
                "nvidia.com/mig-3g.40gb": 7,
            },
            id="mixed-with-one-gpu-whole",
        ),
        pytest.param(
            [layout("all", {"1g.10gb": 7})], "single", {"nvidia.com/gpu": 56}, id="single-all-1g"
        ),
        pytest.param([layout("all")], "single", {"nvidia.com/gpu": 8}, id="single-mig-off"),
        pytest.param([layout("all")], "mixed", {"nvidia.com/gpu": 8}, id="mixed-mig-off"),
        pytest.param(
            [layout([0, 1], {"7g.80gb": 1})],
            "mixed",
            {"nvidia.com/gpu": 6, "nvidia.com/mig-7g.80gb": 2},
            id="uncovered-gpus-stay-whole",
        ),
        pytest.param(
            [layout("all", {"2g.20gb": 3}), layout([12], {"7g.80gb": 1})],
            "mixed",
            {"nvidia.com/mig-2g.20gb": 24},
            id="index-beyond-node-matches-nothing",
        ),
    ],
)
def test_capacity(layouts: list, strategy: capacity.Strategy, want: dict[str, int]) -> None:
    assert capacity.mig_capacity(H100, 8, layouts, strategy) == want


def test_media_extension_resource_name() -> None:
    got = capacity.mig_capacity(H100, 2, [layout("all", {"1g.10gb+me": 1, "3g.40gb": 1})])
    assert got == {"nvidia.com/mig-1g.10gb.me": 2, "nvidia.com/mig-3g.40gb": 2}


@pytest.mark.parametrize(
    ("layouts", "strategy", "phrases"),
    [
        pytest.param(
            [layout("all", {"3g.40gb": 2, "1g.10gb": 1}), layout([2, 3], {"7g.80gb": 1})],
            "mixed",
            ["GPUs 0-1, 4-7 (H100-80GB)", "1g.10gb finds no free placement", "3g.40gb at 0-3"],
            id="names-gpu-indexes-profiles-and-slots",
        ),
        pytest.param(
            [layout("all", {"1g.10gb": 7}), layout([5], {"4g.40gb": 1})],
            "single",
            ["one profile per node", "1g.10gb, 4g.40gb"],
            id="single-refuses-two-profiles",
        ),
        pytest.param(
            [layout("all", BALANCED), layout([7])],
            "single",
            ["MIG on every GPU or on none", "GPU 7"],
            id="single-refuses-mixed-mig-mode",
        ),
        pytest.param(
            [layout([1, 2], {"7g.80gb": 1}), layout([2], BALANCED)],
            "mixed",
            ["device 2 is listed by layout 1 (devices: 1,2) and layout 2 (devices: 2)"],
            id="index-listed-twice",
        ),
    ],
)
def test_validate_node_reasons(
    layouts: list, strategy: capacity.Strategy, phrases: list[str]
) -> None:
    verdict = capacity.validate_mig_node(H100, 8, layouts, strategy)
    assert not verdict.valid
    for phrase in phrases:
        assert phrase in verdict.reason, verdict.reason
    with pytest.raises(GeometryError):
        capacity.mig_capacity(H100, 8, layouts, strategy)


def test_valid_node_has_one_placement_per_gpu() -> None:
    verdict = capacity.validate_mig_node(A100, 4, [layout("all", BALANCED), layout([3])])
    assert verdict.valid
    assert [len(p.instances) for p in verdict.placements] == [4, 4, 4, 0]


def _doc(rendered: migparted.RenderedConfigs) -> dict:
    return yaml.safe_load(rendered.data[migparted.CONFIG_KEY])


def test_render_mig_parted_shape() -> None:
    plain = [layout("all", BALANCED)]
    override = [layout("all", BALANCED), layout([7])]
    off = [layout("all")]
    rendered = migparted.render_mig_parted("h100-inference", [plain, override, off], [H100, A100])
    doc = _doc(rendered)
    assert doc["version"] == "v1" and set(doc["mig-configs"]) == set(rendered.names)
    assert doc["mig-configs"][rendered.names[0]] == [
        {
            "devices": "all",
            "mig-enabled": True,
            "mig-devices": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
        }
    ]
    assert list(doc["mig-configs"][rendered.names[0]][0]["mig-devices"]) == [
        "3g.40gb",
        "2g.20gb",
        "1g.10gb",
    ]
    assert doc["mig-configs"][rendered.names[1]] == [
        {
            "devices": [0, 1, 2, 3, 4, 5, 6, *range(8, 16)],
            "mig-enabled": True,
            "mig-devices": BALANCED,
        },
        {"devices": [7], "mig-enabled": False},
    ]
    assert doc["mig-configs"][rendered.names[2]] == [{"devices": "all", "mig-enabled": False}]


@pytest.mark.parametrize(
    ("pool_a", "layouts_a", "pool_b", "layouts_b", "same"),
    [
        (
            "p",
            [layout("all", BALANCED)],
            "p",
            [layout("all", dict(reversed(BALANCED.items())))],
            True,
        ),
        ("p", [layout([3, 1], BALANCED)], "p", [layout([1, 3], BALANCED)], True),
        ("p", [layout("all", BALANCED)], "q", [layout("all", BALANCED)], False),
        ("p", [layout("all", BALANCED)], "p", [layout("all", {"1g.10gb": 7})], False),
    ],
)
def test_config_names_hash_content_per_pool(
    pool_a: str, layouts_a: list, pool_b: str, layouts_b: list, same: bool
) -> None:
    a = migparted.render_mig_parted(pool_a, [layouts_a], [H100]).names[0]
    b = migparted.render_mig_parted(pool_b, [layouts_b], [A100]).names[0]
    assert (a == b) is same
    assert a.startswith(f"tessera-{pool_a}-")


def test_config_name_fits_a_label_value() -> None:
    name = migparted.render_mig_parted("x" * 80, [[layout("all", BALANCED)]], []).names[0]
    assert len(name) <= 63 and name.startswith("tessera-xxx")


def test_render_refuses_a_layout_impossible_on_a_present_model() -> None:
    a100_40 = catalog.resolve("A100-40GB")
    with pytest.raises(
        GeometryError, match=r"devices: \[2\] on A100-40GB: .*no MIG profile 3g.40gb"
    ):
        migparted.render_mig_parted("p", [[layout([2], {"3g.40gb": 1})]], [H100, a100_40])
