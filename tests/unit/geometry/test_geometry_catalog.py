import pytest

from tessera.domain.geometry import catalog

CANONICAL = [
    "A30-24GB",
    "A100-40GB",
    "A100-80GB",
    "H100-80GB",
    "H100-94GB",
    "H200-141GB",
    "GH200-96GB",
    "GH200-144GB",
    "B200-180GB",
    "RTXPRO6000-96GB",
]


def test_catalog_holds_exactly_the_issue_models_in_order() -> None:
    assert [m.id for m in catalog.models()] == CANONICAL


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param("NVIDIA-H100-80GB-HBM3", "H100-80GB", id="gfd-h100-sxm"),
        pytest.param("NVIDIA-A100-SXM4-40GB", "A100-40GB", id="gfd-a100-40"),
        pytest.param("NVIDIA-H200", "H200-141GB", id="gfd-h200"),
        pytest.param("NVIDIA-A100-80GB-PCIe", "A100-80GB", id="gfd-a100-80-pcie"),
        pytest.param("NVIDIA-H100-NVL", "H100-94GB", id="gfd-h100-nvl"),
        pytest.param("NVIDIA-GH200-144G-HBM3e", "GH200-144GB", id="gfd-gh200-144"),
        pytest.param("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTXPRO6000-96GB", id="rtx"),
        pytest.param("A100-SXM4-40GB", "A100-40GB", id="old-driver-label-without-prefix"),
        pytest.param("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED", "A100-40GB", id="single-shared"),
        pytest.param("NVIDIA-B200-SHARED", "B200-180GB", id="shared-suffix"),
        pytest.param("h100-80gb", "H100-80GB", id="canonical-any-case"),
        pytest.param("NVIDIA H200 NVL", "H200-141GB", id="nvml-name-with-spaces"),
        pytest.param("H100-on-GH200", "GH200-96GB", id="hami-alias"),
        pytest.param("A30", "A30-24GB", id="short-alias"),
    ],
)
def test_resolve_accepts_ids_labels_and_aliases(name: str, want: str) -> None:
    assert catalog.resolve(name).id == want


@pytest.mark.parametrize("name", ["Tesla-V100-SXM2-16GB", "NVIDIA-L4", "", "H100-80GB-X"])
def test_unknown_model_error_lists_every_known_model(name: str) -> None:
    with pytest.raises(catalog.UnknownModelError) as err:
        catalog.resolve(name)
    assert all(model_id in str(err.value) for model_id in CANONICAL)


@pytest.mark.parametrize("model", catalog.models(), ids=lambda m: m.id)
def test_every_profile_fits_its_grid_and_is_keyed_once(model: catalog.GpuModel) -> None:
    assert len(set(model.profile_names)) == len(model.profiles)
    assert len({p.profile_id for p in model.profiles}) == len(model.profiles)
    for p in model.profiles:
        assert p.starts and all(s + p.size <= model.grid for s in p.starts)
        assert p.max_instances * p.size <= model.grid or p.max_instances == 1
        assert p.media_extension == ("+me" in p.name)
        assert p.status in {"confirmed", "inferred", "unconfirmed"}
        assert p.sources, f"{p.name} has no source"


@pytest.mark.parametrize(
    ("model_id", "profile", "starts", "size", "profile_id"),
    [
        ("A100-40GB", "1g.10gb", (0, 2, 4, 6), 2, 15),
        ("H100-80GB", "3g.40gb", (0, 4), 4, 9),
        ("A30-24GB", "1g.6gb", (0, 1, 2, 3), 1, 14),
        ("RTXPRO6000-96GB", "2g.48gb", (0, 6), 6, 5),
        ("RTXPRO6000-96GB", "4g.96gb", (0,), 12, 0),
        ("B200-180GB", "7g.180gb", (0,), 8, 0),
    ],
)
def test_reference_placements_are_in_the_data(
    model_id: str, profile: str, starts: tuple[int, ...], size: int, profile_id: int
) -> None:
    p = catalog.resolve(model_id).profile(profile)
    assert p is not None
    assert (p.starts, p.size, p.profile_id) == (starts, size, profile_id)


def test_the_api_servers_profile_names_are_the_catalogs() -> None:
    """The CRD refuses a MIG profile name outside ``tessera.api.v1alpha1.mig_profiles.KNOWN``;
    it must be exactly the names the catalog's models have, no more, no fewer."""
    from tessera.api.v1alpha1 import mig_profiles

    union = {name for model in catalog.models() for name in model.profile_names}
    assert set(mig_profiles.KNOWN) == union
    assert len(mig_profiles.KNOWN) == len(union)


def test_the_api_servers_profiles_per_model_are_the_catalogs() -> None:
    """``spec.autopilot.profiles`` refuses a profile its model cannot host from
    ``mig_profiles.BY_MODEL``: each catalog model's profiles by its id, in catalog order."""
    from tessera.api.v1alpha1 import mig_profiles

    assert {m.id: m.profile_names for m in catalog.models()} == mig_profiles.BY_MODEL
