import pytest

from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec
from tessera.domain.quota.quantities import (
    CountError,
    counts,
    parse_count,
    parse_quantity,
)

SELECTOR = {"matchLabels": {"tessera.io/tenant": "t"}}


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param(4, 4, id="int"),
        pytest.param(0, 0, id="zero"),
        pytest.param("20480", 20480, id="digit-string"),
        pytest.param("007", 7, id="leading-zeros"),
        pytest.param("1k", 1000, id="kilo"),
        pytest.param("2M", 2_000_000, id="mega"),
        pytest.param("1e3", 1000, id="exponent"),
        pytest.param("1Ki", 1024, id="binary"),
        pytest.param("2.5k", 2500, id="decimal-point-but-whole"),
        pytest.param("+3", 3, id="plus-sign"),
        pytest.param("1E", 10**18, id="exa-suffix"),
    ],
)
def test_spec_counts_are_whole_quantities(value: int | str, want: int) -> None:
    assert parse_count(value, what="spec.hard[x]") == want
    spec = TenantQuotaSpec.model_validate({"namespaceSelector": SELECTOR, "hard": {"a/b": value}})
    assert spec.hard == {"a/b": value}  # the model keeps what was written


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        pytest.param(-1, "-1 is negative", id="negative-int"),
        pytest.param("-1", "'-1' is negative", id="negative-string"),
        pytest.param("0.5", "'0.5' is not a whole number", id="half"),
        pytest.param("1.5", "'1.5' is not a whole number", id="fraction"),
        pytest.param("500m", "'500m' is not a whole number", id="milli"),
        pytest.param("", "'' is not a quantity", id="empty"),
        pytest.param(" 1", "' 1' is not a quantity", id="space"),
        pytest.param("1Q", "'1Q' is not a quantity", id="unknown-suffix"),
        pytest.param("٣", "is not a quantity", id="non-ascii-digit"),
        pytest.param("1e30", "too large", id="beyond-int64"),
        pytest.param(True, "True is not a count", id="bool"),
    ],
)
def test_spec_count_errors_name_the_field_and_the_value(value: int | str, complaint: str) -> None:
    with pytest.raises(CountError, match=r"spec\.hard\[nvidia\.com/gpu\]: .*") as caught:
        parse_count(value, what="spec.hard[nvidia.com/gpu]")
    assert complaint in str(caught.value)
    if isinstance(value, bool):
        return  # the model reads True as 1, like any lax int; the API server refuses booleans
    with pytest.raises(ValueError, match=r"nvidia\.com/gpu"):
        TenantQuotaSpec.model_validate(
            {"namespaceSelector": SELECTOR, "hard": {"nvidia.com/gpu": value}}
        )


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
    with pytest.raises(CountError, match=r"status\.used.*" + repr(value)):
        parse_quantity(value, what="status.used")


def test_counts_name_the_resource_in_errors() -> None:
    assert counts({"a/b": "3", "c/d": 1}, what="spec.total") == {"a/b": 3, "c/d": 1}
    with pytest.raises(CountError, match=r"spec\.total\[c/d\]"):
        counts({"c/d": "x"}, what="spec.total")


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        pytest.param("1.0", "Kubernetes stores it as a fraction: write 1", id="one-point-zero"),
        pytest.param("1000m", "Kubernetes stores it as a fraction: write 1", id="milli"),
        pytest.param(
            "0.5Ki", "Kubernetes stores it as a fraction: write 512", id="binary-fraction"
        ),
        pytest.param("1Pi", "write 1125899906842624", id="binary-past-exact-range"),
        pytest.param("k", "is not a quantity", id="suffix-alone"),
        pytest.param("Ki", "is not a quantity", id="binary-suffix-alone"),
        pytest.param("1e-3", "is not a whole number", id="negative-exponent"),
        pytest.param("10E", "too large", id="past-int64"),
    ],
)
def test_whole_values_kubernetes_reads_as_fractions_say_how_to_write_them(
    value: str, complaint: str
) -> None:
    """Mirrors the API server's quantity library (tests/integration/test_devices_grammar.py)."""
    with pytest.raises(CountError) as caught:
        parse_count(value, what="spec.total[a/b]")
    assert complaint in str(caught.value)


@pytest.mark.parametrize(
    ("value", "want"),
    [("0.0k", 0), ("1.000k", 1000), (".5k", 500), ("5.", 5), ("-0", 0), ("9.2e18", 92 * 10**17)],
)
def test_whole_values_kubernetes_reads_as_integers(value: str, want: int) -> None:
    assert parse_count(value, what="spec.total[a/b]") == want
