"""Whole-number quantities: what a TenantQuota and a ResourceQuota count in.

Accelerator resources are counted, not measured: a MIG slice, a vNPU or a MiB
of HAMi gpumem is an integer. The spec only admits integers or digit strings
(the CRD's CEL rule says so), but what the API server hands back in a
ResourceQuota is a canonical quantity: it stores ``2000`` as ``"2k"``. Every
comparison is therefore made on parsed integers, never on strings, or a
converged tenant would rewrite its quotas on each resync.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_SUFFIXES = {
    "": 1,
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
_QUANTITY = re.compile(
    r"^\+?(?P<digits>[0-9]+)(?:(?P<suffix>[KMGTPE]i|[kMGTPE])|[eE](?P<exp>[0-9]+))?$"
)


class QuantityError(ValueError):
    """A value that is not a whole, non-negative count; the message names where it was found."""


def parse_count(value: int | str, *, what: str) -> int:
    """A spec value: a non-negative int or a string of digits (as the CRD admits)."""
    if isinstance(value, bool):
        raise QuantityError(f"{what}: {value!r} is a boolean, not a count")
    if isinstance(value, int):
        if value < 0:
            raise QuantityError(f"{what}: {value} is negative; counts start at 0")
        return value
    if not value.isascii() or not value.isdigit():
        raise QuantityError(f"{what}: {value!r} is not a whole number (write digits only, e.g. 4)")
    return int(value)


def parse_quantity(value: int | str, *, what: str) -> int:
    """A value the API server wrote back: digits with an optional SI or binary suffix.

    Fractions (``"500m"``, ``"1.5"``) are rejected: no accelerator resource has them,
    so seeing one means the object was not written by Tessera or the resource is not
    a counted one, and guessing a rounding would hide that.
    """
    if isinstance(value, int):
        return parse_count(value, what=what)
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(
            f"{what}: {value!r} is not a whole-number quantity (expected e.g. 4, 2k or 1Ki)"
        )
    digits, suffix, exp = match["digits"], match["suffix"], match["exp"]
    if exp is not None:
        return int(digits) * int(10 ** int(exp))
    return int(digits) * _SUFFIXES[suffix or ""]


def counts(values: Mapping[str, int | str], *, what: str) -> dict[str, int]:
    """Every value of a spec map parsed, each error naming the resource."""
    return {key: parse_count(raw, what=f"{what}[{key}]") for key, raw in values.items()}


def quantities(values: Mapping[str, int | str], *, what: str) -> dict[str, int]:
    """Every value of a map the API server wrote, parsed."""
    return {key: parse_quantity(raw, what=f"{what}[{key}]") for key, raw in values.items()}
