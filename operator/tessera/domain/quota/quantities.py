"""Whole-number quantities: what a TenantQuota and a ResourceQuota count in.

Accelerator resources are counted, not measured: a MIG slice, a vNPU or a MiB
of HAMi gpumem is an integer. The spec admits any Kubernetes quantity whose
value is whole (``4``, ``"1k"``, ``"2Ki"``; the CRD's CEL rule and the model
both use ``tessera.api.v1alpha1.quantity``), and what the API server hands back
in a ResourceQuota is a canonical quantity: it stores ``2000`` as ``"2k"``.
Every comparison is therefore made on parsed integers, never on strings, or a
converged tenant would rewrite its quotas on each resync.
"""

from __future__ import annotations

from collections.abc import Mapping

from tessera.api.v1alpha1 import quantity


class CountError(ValueError):
    """A value that is not a whole, non-negative count; the message names where it was found."""


def parse_count(value: int | str, *, what: str) -> int:
    """A spec value: any whole, non-negative quantity (as the CRD admits)."""
    try:
        return quantity.whole(value)
    except quantity.QuantityError as err:
        raise CountError(f"{what}: {err}") from err


def parse_quantity(value: int | str, *, what: str) -> int:
    """A value the API server wrote back, e.g. ``"2k"``; the same rule as the spec.

    Fractions (``"500m"``, ``"1.5"``) are refused: no accelerator resource has them,
    so seeing one means the object was not written by Tessera or the resource is not
    a counted one, and guessing a rounding would hide that.
    """
    return parse_count(value, what=what)


def counts(values: Mapping[str, int | str], *, what: str) -> dict[str, int]:
    """Every value of a spec map parsed, each error naming the resource."""
    return {key: parse_count(raw, what=f"{what}[{key}]") for key, raw in values.items()}


def quantities(values: Mapping[str, int | str], *, what: str) -> dict[str, int]:
    """Every value of a map the API server wrote, parsed."""
    return {key: parse_quantity(raw, what=f"{what}[{key}]") for key, raw in values.items()}


def accelerators(allocatable: Mapping[str, object]) -> dict[str, int]:
    """What a node advertises of extended (``vendor/name``) resources, as whole counts.

    The API server writes node quantities canonically (80000 MiB of gpumem reads ``"80k"``),
    so they are parsed, not matched as digits; a fractional value is no count and is skipped.
    """
    out: dict[str, int] = {}
    for resource, value in allocatable.items():
        if "/" not in resource or not isinstance(value, int | str):
            continue
        try:
            out[resource] = quantity.whole(value)
        except quantity.QuantityError:
            continue
    return out
