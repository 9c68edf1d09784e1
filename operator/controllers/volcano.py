"""Volcano's scheduler config: the ``deviceshare`` plugin's arguments and the map of known
geometries it points at, kept consistent with the policies naming Volcano.

Called once per pass by ``controllers.schedulers.sync`` (the single writer of the scheduler
side), with every Volcano scheduler config the policies name and the policies naming each
(``tessera.domain.schedulers.VolcanoDemand``). Answers per policy; a policy it says nothing
about has no Volcano part (it names HAMi).
"""

from __future__ import annotations

from tessera.domain.schedulers import SchedulerOutcome, VolcanoDemands

from .runtime import Context


def sync(ctx: Context, demands: VolcanoDemands) -> dict[str, SchedulerOutcome]:
    """Make each named Volcano config match its policies; each policy's outcome by name."""
    del ctx, demands  # filled in by the Volcano part of issue 17
    return {}
