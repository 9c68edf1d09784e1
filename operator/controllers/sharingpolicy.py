"""SharingPolicy controller (being built)."""

from __future__ import annotations

from .runtime import Context, Result

PLURAL = "sharingpolicies"
KIND = "SharingPolicy"


def reconcile(ctx: Context, name: str) -> Result:
    return Result()


def finalize(ctx: Context, name: str) -> bool:
    return True
