"""Whole counts written as Kubernetes quantities: the values of a TenantQuota's hard and total.

Accelerator resources are counted, not measured: a MIG slice, a vNPU or a MiB
of HAMi gpumem is an integer. A count is an integer from 0, or a Kubernetes
quantity the API server itself reads as a whole number (its quantity library's
``isInteger``): ``"4"``, ``"1k"`` (1000), ``"2Ki"``, ``"1e3"``, ``"2.5k"`` (2500).
``"0.5"``, ``"500m"`` and negative values are refused. So are the few whole
values Kubernetes stores as fractions, which the message says how to rewrite:
more fraction digits than the suffix's power of ten (``"1.0"``, ``"1000m"``),
a fraction with a binary suffix (``"1.5Ki"``), binary values past Kubernetes'
exact range (``"1Pi"``), and values past 2^63-1.

``CEL_RULE`` is what the API server checks; ``whole`` is what Tessera computes
with. tests/integration/test_devices_grammar.py sends a table of values to both.
"""

from __future__ import annotations

import re
from decimal import Decimal

MAX = 2**63 - 1  # what a quantity's integer value can hold (int64)
MAX_LENGTH = 18  # the schema's maxLength for a count written as a string
FORMS = "a whole number such as 4, or a whole quantity such as 1k, 2Ki or 1e3"
_DECIMAL = {"": 0, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DIGITS = 18  # Kubernetes keeps at most this many significant digits exactly
# Kubernetes' quantity grammar (resource.ParseQuantity): sign, number, then a binary or
# decimal SI suffix or a decimal exponent ("1E" is exa, "1E3" is an exponent).
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<num>[0-9]*)(\.(?P<frac>[0-9]*))?"
    r"(?:[eE](?P<exp>[+-]?[0-9]+)|(?P<suffix>[KMGTPE]i|[mkMGTPE])?)"
)
# Kubernetes reads "k" or "Ki" alone as 0; a count must have a digit.
HAS_DIGIT = "^[+-]?[0-9]*[.]?[0-9]"

_SHOWN = "(type(self) == int ? string(self) : '\"' + self + '\"')"
# Integers are checked by the schema (minimum: 0), whose error shows the value.
CEL_RULE = (
    f"type(self) == int || (self.matches('{HAS_DIGIT}') && isQuantity(self) && "
    "quantity(self).isInteger() && quantity(self).asInteger() >= 0)"
)
CEL_MESSAGE = (
    f"{_SHOWN} + ' is not a whole, non-negative count: write {FORMS} "
    "(accelerator resources are counted, not measured)'"
)


class QuantityError(ValueError):
    """A value that is not a whole, non-negative count; the message shows the value."""


def whole(value: int | str) -> int:
    """The integer ``value`` stands for; raises QuantityError for what the API server refuses."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise QuantityError(f"{value!r} is not a count: write {FORMS}")
    if isinstance(value, int):
        if value < 0:
            raise QuantityError(f"{value} is negative: counts start at 0")
        if value > MAX:
            raise QuantityError(f"{value} is too large: counts stop at {MAX}")
        return value
    if len(value) > MAX_LENGTH:
        raise QuantityError(f"{value!r} is longer than {MAX_LENGTH} characters: write {FORMS}")
    match = _QUANTITY.fullmatch(value)
    if match is None or re.match(HAS_DIGIT, value) is None:
        raise QuantityError(f"{value!r} is not a quantity: write {FORMS}")
    num, frac = match["num"], match["frac"] or ""
    digits = int(num + frac)
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        power, base = _BINARY[suffix], 2
        exact = not frac and len(num) <= _DIGITS - 4 - power * 3 // 10
    else:
        power = int(match["exp"]) if match["exp"] is not None else _DECIMAL[suffix]
        base = 10
        exact = len(frac) <= power and len(num) + len(frac) <= _DIGITS
    if digits == 0:
        amount = Decimal(0)
    elif base == 10 and power - len(frac) > _DIGITS + 1:
        raise QuantityError(f"{value!r} is too large: counts stop at {MAX}")
    else:
        amount = Decimal(digits) / 10 ** len(frac) * Decimal(base) ** power
    if match["sign"] == "-" and amount:
        raise QuantityError(f"{value!r} is negative: counts start at 0")
    if amount != amount.to_integral_value():
        raise QuantityError(f"{value!r} is not a whole number: write {FORMS}")
    if amount > MAX:
        raise QuantityError(f"{value!r} is too large: counts stop at {MAX}")
    if not exact:
        raise QuantityError(
            f"{value!r} is whole, but Kubernetes stores it as a fraction: write {int(amount)}"
        )
    return int(amount)


def validated(value: int | str) -> int | str:
    """The value unchanged once ``whole`` accepts it (a pydantic after-validator)."""
    whole(value)
    return value
