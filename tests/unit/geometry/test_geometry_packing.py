from collections import Counter

import pytest
from geometry_builders import brute_force_valid
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.domain.geometry import catalog, packing


def exhaustive_min_gpus(model: catalog.GpuModel, demand: dict[str, int]) -> int:
    """Try every way to deal the instances into bins; the oracle shares no code with the packer."""
    items = sorted(n for n, c in demand.items() for _ in range(c))
    best = len(items)

    def deal(i: int, bins: list[Counter[str]]) -> None:
        nonlocal best
        if len(bins) >= best:
            return
        if i == len(items):
            best = len(bins)
            return
        for b in bins:
            b[items[i]] += 1
            if brute_force_valid(model, b):
                deal(i + 1, bins)
            b[items[i]] -= 1
        bins.append(Counter({items[i]: 1}))
        deal(i + 1, bins)
        bins.pop()

    deal(0, [])
    return best


def _check_packing(
    model: catalog.GpuModel, demand: dict[str, int], result: packing.Packing
) -> None:
    total: Counter[str] = Counter()
    for gpu in result.gpus:
        assert gpu.valid, gpu.reason
        total.update(i.profile for i in gpu.instances)
    assert total == Counter({n: c for n, c in demand.items() if c})


@pytest.mark.parametrize(
    ("model_id", "demand", "gpus"),
    [
        ("H100-80GB", {"1g.10gb": 12, "3g.40gb": 3}, 3),
        ("H100-80GB", {"3g.40gb": 3, "4g.40gb": 2}, 3),
        ("H100-80GB", {"1g.10gb+me": 3, "7g.80gb": 2}, 5),
        ("A100-40GB", {"1g.5gb": 1000}, 143),
        ("A30-24GB", {"2g.12gb": 3, "1g.6gb": 2}, 2),
        ("RTXPRO6000-96GB", {"2g.48gb": 1, "1g.24gb": 3}, 2),
        ("B200", {}, 0),
    ],
)
def test_pack_known_demands(model_id: str, demand: dict[str, int], gpus: int) -> None:
    model = catalog.resolve(model_id)
    result = packing.pack(model, demand)
    assert len(result.gpus) == gpus and result.optimal
    _check_packing(model, demand, result)


@pytest.mark.parametrize("model_id", ["A30-24GB", "H100-80GB", "RTXPRO6000-96GB"])
def test_pack_is_optimal_against_exhaustive_search(model_id: str) -> None:
    model = catalog.resolve(model_id)

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(st.dictionaries(st.sampled_from(model.profile_names), st.integers(0, 3), max_size=3))
    def check(demand: dict[str, int]) -> None:
        if sum(demand.values()) > 7:
            return
        result = packing.pack(model, demand)
        _check_packing(model, demand, result)
        assert len(result.gpus) == exhaustive_min_gpus(model, demand), demand
        assert result.optimal

    check()


@pytest.mark.parametrize(
    ("demand", "match"),
    [({"3g.20gb": 1}, "no MIG profile 3g.20gb"), ({"1g.10gb": -1}, "negative")],
)
def test_pack_refuses_impossible_demands(demand: dict[str, int], match: str) -> None:
    with pytest.raises(packing.DemandError, match=match):
        packing.pack(catalog.resolve("H100-80GB"), demand)


def test_large_mixed_demand_reaches_its_lower_bound_quickly() -> None:
    model = catalog.resolve("H100-80GB")
    demand = {"2g.20gb": 100, "3g.40gb": 37, "1g.10gb": 55, "1g.20gb": 20}
    result = packing.pack(model, demand)
    assert len(result.gpus) == result.lower_bound == 56 and result.optimal
    _check_packing(model, demand, result)


def test_a_tiny_budget_reports_an_unproven_answer() -> None:
    model = catalog.resolve("H100-80GB")
    demand = {"3g.40gb": 3, "4g.40gb": 2, "2g.20gb": 5, "1g.20gb": 3, "1g.10gb": 9}
    result = packing.pack(model, demand, budget=0)
    _check_packing(model, demand, result)
    assert result.optimal == (len(result.gpus) == result.lower_bound)


# -- limits: every demand gets an answer or a clear refusal, promptly -----------------------------


@pytest.mark.parametrize(
    ("demand", "refused"),
    [
        ({"1g.10gb": packing.MAX_INSTANCES}, False),
        ({"1g.10gb": packing.MAX_INSTANCES + 1}, True),
        ({"1g.10gb": 9_000, "3g.40gb": 1_000}, False),
        ({"1g.10gb": 9_000, "3g.40gb": 1_001}, True),
        ({"7g.80gb": packing.MAX_INSTANCES}, False),
        ({"1g.10gb": 10_000_000}, True),
        ({"1g.10gb": 0, "2g.20gb": packing.MAX_INSTANCES}, False),
    ],
)
def test_demands_past_the_limit_are_refused_and_up_to_it_answered(
    demand: dict[str, int], refused: bool
) -> None:
    model = catalog.resolve("H100-80GB")
    if refused:
        with pytest.raises(packing.DemandError, match=f"at most {packing.MAX_INSTANCES}"):
            packing.pack(model, demand)
        return
    result = packing.pack(model, demand)
    _check_packing(model, demand, result)
    assert len(result.gpus) >= result.lower_bound


def test_a_packing_deeper_than_the_search_is_answered_unproven() -> None:
    """Greedy leaves a gap to the lower bound past SEARCH_GPUS GPUs: no exact search (it would
    recurse once per GPU, past Python's limit), and no claim of optimality."""
    model = catalog.resolve("H100-80GB")
    demand = {"1g.10gb": 4_000, "2g.20gb": 2_000, "3g.40gb": 1_200}
    result = packing.pack(model, demand)
    _check_packing(model, demand, result)
    assert result.lower_bound > packing.SEARCH_GPUS
    assert len(result.gpus) > result.lower_bound and not result.optimal
