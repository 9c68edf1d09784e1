from collections import Counter

import pytest
from geometry_builders import assert_placement_sound, brute_force_valid
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.domain.geometry import catalog, placement

EIGHT_SLOT = [m for m in catalog.models() if m.grid == 8]


def counts(*profiles: str) -> dict[str, int]:
    return dict(Counter(profiles))


@pytest.mark.parametrize(
    ("model_id", "profiles", "valid"),
    [
        # observed on hardware (docs/facts/mig.md §Layouts seen on hardware)
        ("A100-40GB", ("3g.20gb", "3g.20gb"), True),
        ("A100-40GB", ("4g.20gb", "2g.10gb", "1g.5gb"), True),
        ("A100-40GB", ("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"), True),
        ("A100-40GB", ("2g.10gb",) + ("1g.5gb",) * 5, True),
        ("A100-40GB", ("1g.5gb",) * 6 + ("1g.5gb+me",), True),
        ("H100-80GB", ("1g.10gb",) * 7, True),
        ("H100-94GB", ("3g.47gb", "1g.24gb", "1g.12gb"), True),
        ("GH200-96GB", ("1g.24gb",) * 3, True),
        ("A30-24GB", ("1g.6gb", "1g.6gb", "2g.12gb"), True),
        ("RTXPRO6000-96GB", ("1g.24gb",) * 4, True),
        ("RTXPRO6000-96GB", ("2g.48gb", "1g.24gb", "1g.24gb"), True),
        ("A100-40GB", ("4g.20gb", "3g.20gb"), True),  # R510+
        # known invalid (docs/facts/mig.md §Layouts seen on hardware)
        ("H100-80GB", ("3g.40gb", "3g.40gb", "1g.10gb"), False),
        ("H100-80GB", ("4g.40gb", "4g.40gb"), False),
        ("H100-80GB", ("2g.20gb",) * 4, False),
        ("H100-80GB", ("4g.40gb", "2g.20gb", "2g.20gb"), False),
        ("H100-80GB", ("2g.20gb",) * 3 + ("1g.10gb",) * 2, False),
        ("H100-80GB", ("3g.40gb", "2g.20gb", "2g.20gb", "1g.10gb"), False),
        ("H100-80GB", ("7g.80gb", "1g.10gb"), False),
        ("H100-80GB", ("1g.20gb",) * 4 + ("1g.10gb",), False),
        ("H100-80GB", ("1g.20gb", "1g.20gb", "3g.40gb", "1g.10gb"), False),
        ("H100-80GB", ("1g.10gb",) * 7 + ("1g.20gb",), False),
        ("GH200-96GB", ("1g.12gb+me",) * 2, False),
        ("A30-24GB", ("4g.24gb", "1g.6gb"), False),
        ("A30-24GB", ("2g.12gb", "2g.12gb", "1g.6gb"), False),
        ("A30-24GB", ("1g.6gb+me", "2g.12gb+me"), False),
        ("RTXPRO6000-96GB", ("2g.48gb", "1g.24gb", "1g.24gb", "1g.24gb"), False),
        ("RTXPRO6000-96GB", ("1g.24gb+me", "1g.24gb+me.all"), False),
        ("H100-80GB", ("3g.20gb",), False),  # an A100-40GB name
    ],
)
def test_known_layouts(model_id: str, profiles: tuple[str, ...], valid: bool) -> None:
    model = catalog.resolve(model_id)
    result = placement.place(model, counts(*profiles))
    assert result.valid is valid, result.reason
    assert result.model == model_id
    if valid:
        assert_placement_sound(model, counts(*profiles), list(result.instances))
    else:
        assert result.instances == ()


@pytest.mark.parametrize(
    ("model_id", "profiles", "phrases"),
    [
        pytest.param(
            "H100-80GB",
            ("3g.40gb", "3g.40gb", "1g.10gb"),
            [
                "1g.10gb finds no free placement",
                "3g.40gb at 0-3",
                "3g.40gb at 4-7",
                "9 slots",
                "Fits instead: 3g.40gb x2",
            ],
            id="two-3g-block-a-1g",
        ),
        pytest.param(
            "H100-80GB",
            ("4g.40gb", "2g.20gb", "2g.20gb"),
            [
                "2g.20gb finds no free placement",
                "slots 0-1, 2-3 or 4-5",
                "4g.40gb at 0-3",
                "2g.20gb at 4-5",
                "free slots 6-7 could still take 1g.10gb",
            ],
            id="4g-leaves-one-2g-start",
        ),
        pytest.param(
            "H100-80GB",
            ("2g.20gb",) * 4,
            ["2g.20gb x4 exceeds its limit of 3 per GPU", "Fits instead: 2g.20gb x3"],
            id="per-profile-cap",
        ),
        pytest.param(
            "A100-80GB",
            ("1g.10gb+me", "1g.20gb+me"),
            ["has no MIG profile 1g.20gb+me"],
            id="unknown-profile-lists-known",
        ),
        pytest.param(
            "A30-24GB",
            ("1g.6gb+me", "2g.12gb+me"),
            ["at most one media-extension profile"],
            id="two-media-variants",
        ),
        pytest.param(
            "H100-80GB",
            ("3g.20gb",),
            ["did you mean 3g.40gb?", "1g.10gb, 1g.10gb+me"],
            id="near-miss-name",
        ),
    ],
)
def test_reasons_name_profiles_slots_and_alternatives(
    model_id: str, profiles: tuple[str, ...], phrases: list[str]
) -> None:
    reason = placement.place(catalog.resolve(model_id), counts(*profiles)).reason
    for phrase in phrases:
        assert phrase in reason, reason


def test_valid_reason_lists_each_instance_slot() -> None:
    result = placement.place(
        catalog.resolve("A100-40GB"), counts("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb")
    )
    assert result.reason == "3g.20gb at 4-7, 2g.10gb at 0-1, 1g.5gb at 2, 1g.5gb at 3"


def test_empty_layout_is_valid_and_places_nothing() -> None:
    result = placement.place(catalog.resolve("B200"), {})
    assert (result.valid, result.instances) == (True, ())


def test_json_shape_is_the_cli_contract() -> None:
    doc = placement.place(catalog.resolve("A30"), {"2g.12gb": 2}).as_dict()
    assert doc == {
        "valid": True,
        "model": "A30-24GB",
        "placement": [
            {"profile": "2g.12gb", "start": 0, "size": 2},
            {"profile": "2g.12gb", "start": 2, "size": 2},
        ],
        "reason": doc["reason"],
    }


def _multisets(model: catalog.GpuModel) -> st.SearchStrategy[dict[str, int]]:
    return st.dictionaries(st.sampled_from(model.profile_names), st.integers(0, 5), max_size=5)


@pytest.mark.parametrize("model", catalog.models(), ids=lambda m: m.id)
def test_solver_agrees_with_brute_force(model: catalog.GpuModel) -> None:
    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(_multisets(model))
    def check(profiles: dict[str, int]) -> None:
        result = placement.solve(model, placement.counts_key(profiles))
        assert result.valid == brute_force_valid(model, profiles), (profiles, result.reason)
        if result.valid:
            assert_placement_sound(model, profiles, list(result.instances))
        else:
            assert "Fits instead" in result.reason or "Nothing requested fits" in result.reason

    check()


def test_memoised_answer_is_the_same_object() -> None:
    model = catalog.resolve("H200")
    first = placement.place(model, {"1g.18gb": 2, "3g.71gb": 1})
    assert placement.place(model, {"3g.71gb": 1, "1g.18gb": 2, "7g.141gb": 0}) is first
