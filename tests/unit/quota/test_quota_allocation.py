from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tessera.domain.quota.allocation import Slot, allocate, step_down


def slots(used: Sequence[int], current: Sequence[int | None] | None = None) -> list[Slot]:
    names = "abcdefgh"
    now = current if current is not None else [None] * len(used)
    return [Slot(names[i], u, c) for i, (u, c) in enumerate(zip(used, now, strict=True))]


def targets(total: int, cap: int | None, used: Sequence[int], current=None) -> tuple[int, ...]:
    got = allocate(total, cap, slots(used, current)).targets
    return tuple(got[s.namespace] for s in slots(used, current))


@pytest.mark.parametrize(
    ("total", "cap", "used", "current", "want"),
    [
        pytest.param(6, None, [0, 0, 0], None, (2, 2, 2), id="fresh-tenant-splits-evenly"),
        pytest.param(7, None, [0, 0, 0], None, (3, 2, 2), id="odd-unit-by-name-when-idle"),
        pytest.param(8, None, [0, 1, 0], None, (2, 4, 2), id="odd-unit-to-busiest"),
        pytest.param(10, 3, [0, 0, 0], None, (3, 3, 3), id="caps-leave-headroom-unused"),
        pytest.param(10, 5, [4, 0, 0], None, (5, 3, 2), id="capped-namespace-spills-to-others"),
        pytest.param(9, None, [1, 0, 0], [3, 3, 3], (3, 3, 3), id="unpressed-limits-stand"),
        pytest.param(9, None, [3, 0, 0], [3, 3, 3], (5, 2, 2), id="full-namespace-gets-headroom"),
        pytest.param(
            6, None, [2, 0, 0], [3, 3, None], (4, 1, 1), id="new-namespace-forces-rebalance"
        ),
        pytest.param(6, None, [0, 0], [2, 2], (3, 3), id="raised-total-is-handed-out"),
        pytest.param(4, None, [0, 0], [5, 5], (2, 2), id="lowered-total-is-taken-back"),
        pytest.param(10, 1, [3, 0], None, (1, 1), id="explicit-hard-below-usage-wins"),
        pytest.param(0, None, [0, 0], [0, 0], (0, 0), id="zero-total"),
        pytest.param(5, 4, [2, 2], [3, 2], (3, 2), id="converged-with-caps"),
    ],
)
def test_allocate(
    total: int,
    cap: int | None,
    used: list[int],
    current: list[int | None] | None,
    want: tuple[int, ...],
) -> None:
    assert targets(total, cap, used, current) == want


@pytest.mark.parametrize(
    ("total", "used", "current", "want"),
    [
        pytest.param(4, [3, 3], [3, 3], (3, 3), id="at-usage-stays"),
        pytest.param(4, [3, 3], [5, 3], (3, 3), id="lowered-to-usage-never-below"),
        pytest.param(3, [3, 1], [2, 5], (2, 1), id="never-raised-even-if-below-usage"),
        pytest.param(3, [3, 1], [None, 5], (3, 1), id="new-namespace-pinned-at-usage"),
    ],
)
def test_usage_over_total_only_lowers_to_usage(
    total: int, used: list[int], current: list[int | None], want: tuple[int, ...]
) -> None:
    got = allocate(total, None, slots(used, current))
    assert got.over_total
    assert tuple(got.targets[s.namespace] for s in slots(used, current)) == want


def test_no_namespaces_no_targets() -> None:
    assert allocate(5, None, []).targets == {}


@pytest.mark.parametrize(
    ("slot", "target", "want"),
    [
        pytest.param(Slot("a", 1, 5), 3, 3, id="decrease-happens-in-wave-1"),
        pytest.param(Slot("a", 1, 2), 4, 2, id="increase-waits-for-wave-2"),
        pytest.param(Slot("a", 2, None), 4, 2, id="new-limit-starts-at-usage"),
    ],
)
def test_step_down(slot: Slot, target: int, want: int) -> None:
    assert step_down(slot, target) == want


@st.composite
def tenants(draw: st.DrawFn) -> tuple[int, int | None, list[Slot]]:
    n = draw(st.integers(1, 5))
    cap = draw(st.none() | st.integers(0, 12))
    used = draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
    current = draw(st.lists(st.none() | st.integers(0, 15), min_size=n, max_size=n))
    floors = sum(u if cap is None else min(u, cap) for u in used)
    total = draw(st.integers(floors, floors + 30))
    return total, cap, slots(used, current)


@given(tenants())
def test_targets_fit_total_floor_and_cap(case: tuple[int, int | None, list[Slot]]) -> None:
    total, cap, tenant = case
    got = allocate(total, cap, tenant).targets
    assert sum(got.values()) <= total
    for s in tenant:
        assert got[s.namespace] >= (s.used if cap is None else min(s.used, cap))
        assert cap is None or got[s.namespace] <= cap


@given(tenants())
def test_transition_is_a_fixed_point_after_each_wave(
    case: tuple[int, int | None, list[Slot]],
) -> None:
    total, cap, tenant = case
    got = allocate(total, cap, tenant).targets
    after_wave_1 = [Slot(s.namespace, s.used, step_down(s, got[s.namespace])) for s in tenant]
    assert allocate(total, cap, after_wave_1).targets == got
    after_wave_2 = [Slot(s.namespace, s.used, got[s.namespace]) for s in tenant]
    assert allocate(total, cap, after_wave_2).targets == got
