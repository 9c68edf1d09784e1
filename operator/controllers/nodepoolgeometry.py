"""NodePoolGeometry controller (being built)."""

from __future__ import annotations

from .runtime import Context, Result

PLURAL = "nodepoolgeometries"
KIND = "NodePoolGeometry"


def reconcile(ctx: Context, name: str) -> Result:
    return Result()


def finalize(ctx: Context, name: str) -> None:
    return None
