import pytest

from tessera.domain.quota.quantities import (
    QuantityError,
    counts,
    parse_count,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param(4, 4, id="int"),
        pytest.param(0, 0, id="zero"),
        pytest.param("20480", 20480, id="digit-string"),
        pytest.param("007", 7, id="leading-zeros"),
    ],
)
def test_spec_counts_are_whole_numbers(value: int | str, want: int) -> None:
    assert parse_count(value, what="spec.hard[x]") == want


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        pytest.param(-1, "negative", id="negative-int"),
        pytest.param("1.5", "whole number", id="fraction"),
        pytest.param("2k", "whole number", id="suffix-not-in-spec"),
        pytest.param("", "whole number", id="empty"),
        pytest.param("٣", "whole number", id="non-ascii-digit"),
        pytest.param(True, "boolean", id="bool"),
    ],
)
def test_spec_count_errors_name_the_field(value: int | str, complaint: str) -> None:
    with pytest.raises(QuantityError, match=r"spec\.hard\[nvidia\.com/gpu\].*" + complaint):
        parse_count(value, what="spec.hard[nvidia.com/gpu]")


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param("4", 4, id="plain"),
        pytest.param("2k", 2000, id="canonical-thousands"),
        pytest.param("1Ki", 1024, id="binary"),
        pytest.param("3M", 3_000_000, id="mega"),
        pytest.param("1E", 10**18, id="exa-suffix"),
        pytest.param("2e3", 2000, id="exponent"),
        pytest.param("1E3", 1000, id="capital-exponent"),
        pytest.param(5, 5, id="int"),
    ],
)
def test_observed_quantities_accept_canonical_forms(value: int | str, want: int) -> None:
    assert parse_quantity(value, what="status.used") == want


@pytest.mark.parametrize("value", ["500m", "1.5", "-2", "1Q", "k"])
def test_observed_fractions_and_junk_are_refused(value: str) -> None:
    with pytest.raises(QuantityError, match=r"status\.used.*whole-number quantity"):
        parse_quantity(value, what="status.used")


def test_counts_name_the_resource_in_errors() -> None:
    assert counts({"a/b": "3", "c/d": 1}, what="spec.total") == {"a/b": 3, "c/d": 1}
    with pytest.raises(QuantityError, match=r"spec\.total\[c/d\]"):
        counts({"c/d": "x"}, what="spec.total")
