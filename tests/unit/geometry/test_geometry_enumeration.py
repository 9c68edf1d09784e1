import itertools

import pytest
from geometry_builders import brute_force_valid

from tessera.domain.geometry import catalog, enumeration

BASE_8 = ("1g", "1g_2m", "2g", "3g", "4g", "7g")


def _base(model: catalog.GpuModel, *, with_2m: bool = True) -> list[str]:
    """The reference's role names mapped onto the model's profile names (no +me)."""
    plain = [p for p in model.profiles if not p.media_extension]
    if not with_2m:
        plain = [p for p in plain if not (p.compute_slices == 1 and p.size == 2)]
    return [p.name for p in plain]


@pytest.mark.parametrize("model", [m for m in catalog.models() if m.grid == 8], ids=lambda m: m.id)
@pytest.mark.parametrize(
    ("with_2m", "valid", "maximal"),
    [
        pytest.param(True, 77, 28, id="reference-5.5-with-1g-2m"),
        pytest.param(False, 37, 12, id="reference-5.5-nos-view"),
    ],
)
def test_eight_slot_counts_match_the_reference(
    model: catalog.GpuModel, with_2m: bool, valid: int, maximal: int
) -> None:
    names = _base(model, with_2m=with_2m)
    assert len(enumeration.layouts(model, profiles=names)) == valid
    assert len(enumeration.layouts(model, profiles=names, maximal=True)) == maximal


@pytest.mark.parametrize(
    ("model_id", "names"),
    [
        ("A30-24GB", ["1g.6gb", "2g.12gb", "4g.24gb"]),
        ("RTXPRO6000-96GB", ["1g.24gb", "2g.48gb", "4g.96gb"]),
    ],
)
def test_small_grids_have_nine_valid_and_four_maximal(model_id: str, names: list[str]) -> None:
    model = catalog.resolve(model_id)
    assert len(enumeration.layouts(model, profiles=names)) == 9
    maximal = {
        tuple(sorted(dict(c).items()))
        for c in enumeration.layouts(model, profiles=names, maximal=True)
    }
    one, two, four = names
    assert maximal == {
        ((one, 4),),
        ((one, 2), (two, 1)),
        ((two, 2),),
        ((four, 1),),
    }


@pytest.mark.parametrize("model_id", ["A30-24GB", "H100-80GB"])
def test_enumeration_is_exactly_the_brute_force_set(model_id: str) -> None:
    model = catalog.resolve(model_id)
    ranges = [range(p.max_instances + 1) for p in model.profiles]
    want = set()
    for vector in itertools.product(*ranges):
        counts = {p.name: k for p, k in zip(model.profiles, vector, strict=True) if k}
        if counts and brute_force_valid(model, counts):
            want.add(tuple(sorted(counts.items())))
    assert {tuple(sorted(c)) for c in enumeration.layouts(model)} == want


@pytest.mark.parametrize("model", catalog.models(), ids=lambda m: m.id)
def test_maximal_layouts_take_nothing_more(model: catalog.GpuModel) -> None:
    for counts in enumeration.layouts(model, maximal=True):
        assert brute_force_valid(model, dict(counts))
        for name in model.profile_names:
            grown = dict(counts)
            grown[name] = grown.get(name, 0) + 1
            assert not brute_force_valid(model, grown), (counts, name)


def test_unknown_profile_in_menu_is_refused() -> None:
    with pytest.raises(ValueError, match=r"3g\.20gb"):
        enumeration.layouts(catalog.resolve("H100-80GB"), profiles=["3g.20gb"])
