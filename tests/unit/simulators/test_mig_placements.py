"""The simulated MIG manager's own placement table (devcluster/mig_placements.yaml).

The simulator must answer from NVIDIA's published placements, not from Tessera's code: known
layouts are checked against the table here, and — two independent sources — the table and
Tessera's placement solver must agree on every layout a GPU could be asked to hold.
"""

from __future__ import annotations

import itertools

import pytest

from devcluster import hardware, migmanager
from tessera.domain.geometry import catalog, placement


@pytest.mark.parametrize(
    ("model", "layout"),
    [
        ("A100-40GB", {"1g.5gb": 7}),
        ("A100-40GB", {"3g.20gb": 2}),
        ("A100-40GB", {"4g.20gb": 1, "3g.20gb": 1}),
        ("A100-40GB", {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}),  # HAMi's packing example
        ("A100-40GB", {"1g.10gb": 1, "1g.5gb": 6}),
        ("A100-40GB", {"1g.5gb+me": 1, "1g.5gb": 6}),
        ("A100-40GB", {"7g.40gb": 1}),
        ("H100-80GB", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}),
        ("H100-80GB", {"1g.20gb": 4}),
        ("H100-80GB", {"2g.20gb": 3, "1g.10gb": 1}),
        ("A30-24GB", {"2g.12gb": 1, "1g.6gb": 2}),
        ("A30-24GB", {"4g.24gb": 1}),
        ("RTXPRO6000-96GB", {"2g.48gb": 1, "1g.24gb": 2}),
    ],
)
def test_known_valid_layouts_fit(model: str, layout: dict[str, int]) -> None:
    gpu = hardware.gpu(model)
    assert migmanager.problem(gpu, layout) is None
    assert migmanager.placement(gpu, layout) is not None


@pytest.mark.parametrize(
    ("model", "layout", "why"),
    [
        ("A100-40GB", {"4g.20gb": 2}, "at most 1 per GPU"),
        # 2x 3g cover all 8 slots (§2.2: {0,4}:4); 3g+3g+1g is the layout that mig-parted's
        # known_configs.go wrongly accepts (docs/facts/mig.md §Lists that sum slices).
        ("A100-40GB", {"3g.20gb": 2, "1g.5gb": 1}, "do not fit side by side"),
        ("A100-40GB", {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1}, "do not fit side by side"),
        ("A100-40GB", {"2g.10gb": 4}, "at most 3 per GPU"),
        ("A100-40GB", {"1g.5gb": 8}, "at most 7 per GPU"),
        ("A100-40GB", {"1g.10gb": 4, "1g.5gb": 1}, "do not fit side by side"),
        ("A100-40GB", {"3g.40gb": 1}, "A100-40GB has no MIG profile 3g.40gb"),
        ("A100-40GB", {"7g.40gb": 1, "1g.5gb": 1}, "do not fit side by side"),
        ("H100-80GB", {"2g.20gb": 3, "1g.20gb": 1, "1g.10gb": 1}, "do not fit side by side"),
        ("H100-80GB", {"1g.10gb+me": 2}, "at most 1 per GPU"),
        ("A30-24GB", {"1g.6gb+me": 1, "2g.12gb+me": 1}, "more than one media-extension"),
        ("A30-24GB", {"2g.12gb": 2, "1g.6gb": 1}, "do not fit side by side"),
        ("RTXPRO6000-96GB", {"2g.48gb": 1, "1g.24gb": 3}, "do not fit side by side"),
    ],
)
def test_known_invalid_layouts_are_refused_with_the_reason(
    model: str, layout: dict[str, int], why: str
) -> None:
    gpu = hardware.gpu(model)
    problem = migmanager.problem(gpu, layout)
    assert problem is not None and why in problem


def test_a_placement_puts_each_instance_on_its_published_start_slots() -> None:
    gpu = hardware.gpu("A100-40GB")
    assert migmanager.placement(gpu, {"4g.20gb": 1, "3g.20gb": 1}) == {
        "4g.20gb": (0,),
        "3g.20gb": (4,),
    }
    assert migmanager.placement(gpu, {"1g.10gb": 1, "1g.5gb": 6}) == {
        "1g.10gb": (6,),
        "1g.5gb": (0, 1, 2, 3, 4, 5),
    }


@pytest.mark.parametrize("gpu", hardware.gpu_models(), ids=lambda g: g.model)
def test_the_table_is_consistent(gpu: hardware.Gpu) -> None:
    for name, profile in gpu.profiles.items():
        assert profile.starts and profile.max >= 1, name
        assert all(s >= 0 and s + profile.size <= gpu.slots for s in profile.starts), name
    assert gpu.one_per_gpu <= set(gpu.profiles)
    assert hardware.gpu(gpu.product) is gpu


def _layouts(gpu: hardware.Gpu) -> list[dict[str, int]]:
    """Every multiset of the model's profiles up to its instance limit (a few thousand)."""
    names = sorted(gpu.profiles)
    out: list[dict[str, int]] = []
    for size in range(1, gpu.max_instances + 1):
        for combo in itertools.combinations_with_replacement(names, size):
            out.append({n: combo.count(n) for n in set(combo)})
    return out


@pytest.mark.parametrize("gpu", hardware.gpu_models(), ids=lambda g: g.model)
def test_the_simulator_and_tessera_agree_on_every_layout(gpu: hardware.Gpu) -> None:
    """Two independent sources: a disagreement is a bug in one of them (fix the one that
    contradicts docs/facts/mig.md)."""
    model = catalog.resolve(gpu.product)
    assert model.id == gpu.model
    assert set(model.profile_names) == set(gpu.profiles)
    disagree = [
        layout
        for layout in _layouts(gpu)
        if (migmanager.problem(gpu, layout) is None)
        != placement.fits(model, placement.counts_key(layout))
    ]
    assert disagree == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("mig-configs: {c: [{devices: all, mig-enabled: false}]}", "missing 'version'"),
        ("version: v2\nmig-configs: {c: [{devices: all, mig-enabled: false}]}", "unknown version"),
        ("version: v1\nmig-configs: {other: [{devices: all, mig-enabled: false}]}", "not present"),
        ("version: v1\nmig-configs: {c: []}", "at least one entry"),
        ("version: v1\nmig-configs: {c: [{mig-enabled: false}]}", "missing required field: devic"),
        ("version: v1\nmig-configs: {c: [{devices: some, mig-enabled: false}]}", "invalid string"),
        ("version: v1\nmig-configs: {c: [{devices: all, mig-enabled: true}]}", "'mig-devices'"),
        (
            "version: v1\nmig-configs: {c: [{devices: all, mig-enabled: false, "
            "mig-devices: {1g.5gb: 1}}]}",
            "included when 'mig-enabled' is false",
        ),
        (
            "version: v1\nmig-configs: {c: [{devices: all, mig-enabled: true, "
            "mig-devices: {1g.5gb: -1}}]}",
            "invalid count",
        ),
    ],
)
def test_the_mig_parted_config_is_read_like_mig_parted(text: str, why: str) -> None:
    with pytest.raises(migmanager.MigError, match=why):
        migmanager.config_entries(text, "c")


def test_resources_per_gpu_later_entries_win_and_strategies_name_them() -> None:
    text = """
version: v1
mig-configs:
  c:
    - {devices: all, mig-enabled: true, mig-devices: {3g.40gb: 2}}
    - {devices: [1, 9], mig-enabled: false}
"""
    entries = migmanager.config_entries(text, "c")
    gpu = hardware.gpu("H100-80GB")
    assert migmanager.resources(gpu, 2, entries, "mixed") == {
        "nvidia.com/mig-3g.40gb": 2,
        "nvidia.com/gpu": 1,
    }
    assert migmanager.resources(gpu, 2, entries, "single") == {"nvidia.com/gpu": 3}
    bad = migmanager.config_entries(
        "version: v1\nmig-configs: {c: [{devices: [1], mig-enabled: true, "
        "mig-devices: {4g.40gb: 2}}]}",
        "c",
    )
    with pytest.raises(migmanager.MigError, match=r"GPU 1: 2x 4g\.40gb: at most 1"):
        migmanager.resources(gpu, 2, bad, "mixed")
