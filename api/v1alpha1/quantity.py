"""Whole counts written as Kubernetes quantities: the values of a TenantQuota's hard and total.

Accelerator resources are counted, not measured: a MIG slice, a vNPU or a MiB
of HAMi gpumem is an integer. A count may be written as any Kubernetes quantity
whose value is a whole number from 0 to 2^63-1: ``4``, ``"4"``, ``"1k"`` (1000),
``"2Mi"``, ``"1e3"``, ``"2.5k"`` (2500). ``"0.5"``, ``"500m"`` and negative
values are refused. ``CEL_RULE`` is what the API server checks (its quantity
library); ``whole`` is what Tessera computes with.
"""

from __future__ import annotations

import re
from decimal import Decimal

MAX = 2**63 - 1  # what a quantity's integer value can hold (int64)
MAX_LENGTH = 18  # the schema's maxLength for a count written as a string
FORMS = "a whole number such as 4, or a whole quantity such as 1k, 2Ki or 1e3"
_SUFFIX: dict[str, Decimal | int] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
# Kubernetes' quantity grammar (resource.ParseQuantity): sign, number, then a binary or
# decimal SI suffix or a decimal exponent ("1E" is exa, "1E3" is an exponent).
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(?:[eE](?P<exp>[+-]?[0-9]+)|(?P<suffix>[KMGTPE]i|[mkMGTPE])?)"
)

_SHOWN = "(type(self) == int ? string(self) : '\"' + self + '\"')"
# Integers are checked by the schema (minimum: 0), whose error shows the value.
CEL_RULE = (
    "type(self) == int || "
    "(isQuantity(self) && quantity(self).isInteger() && quantity(self).sign() >= 0)"
)
CEL_MESSAGE = (
    f"{_SHOWN} + ' is not a whole, non-negative count: write {FORMS} "
    "(accelerator resources are counted, not measured)'"
)


class QuantityError(ValueError):
    """A value that is not a whole, non-negative count; the message shows the value."""


def whole(value: int | str) -> int:
    """The integer ``value`` stands for; raises QuantityError for fractions and negatives."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise QuantityError(f"{value!r} is not a count: write {FORMS}")
    if isinstance(value, int):
        amount = Decimal(value)
    elif len(value) > MAX_LENGTH:
        raise QuantityError(f"{value!r} is longer than {MAX_LENGTH} characters: write {FORMS}")
    else:
        match = _QUANTITY.fullmatch(value)
        if match is None:
            raise QuantityError(f"{value!r} is not a quantity: write {FORMS}")
        try:
            amount = Decimal(match["sign"] + match["number"])
            if match["exp"] is not None:
                amount = amount.scaleb(int(match["exp"]))
            else:
                amount *= _SUFFIX[match["suffix"] or ""]
        except ArithmeticError as err:  # an exponent too large to compute with
            raise QuantityError(f"{value!r} is too large: counts stop at {MAX}") from err
    if amount < 0:
        raise QuantityError(f"{value!r} is negative: counts start at 0")
    if amount != amount.to_integral_value():
        raise QuantityError(f"{value!r} is not a whole number: write {FORMS}")
    if amount > MAX:
        raise QuantityError(f"{value!r} is too large: counts stop at {MAX}")
    return int(amount)


def validated(value: int | str) -> int | str:
    """The value unchanged once ``whole`` accepts it (a pydantic after-validator)."""
    whole(value)
    return value
