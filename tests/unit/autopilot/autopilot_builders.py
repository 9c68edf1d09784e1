"""Wrapper builders for the autopilot's tables (kueue style): ``gpu("n1", 0).layout(...).busy()``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from tessera.domain.autopilot import choice, demand
from tessera.domain.autopilot.bounds import Bounds

H100 = "H100-80GB"


@dataclass(frozen=True)
class GpuBuilder:
    value: demand.Gpu

    def layout(self, **profiles: int) -> GpuBuilder:
        return GpuBuilder(replace(self.value, layout=demand.counts(_names(profiles))))

    def busy(self, **profiles: int) -> GpuBuilder:
        used = _names(profiles) or {self.value.layout[0][0]: 1}
        return GpuBuilder(replace(self.value, used=demand.counts(used)))

    def changed_today(self, n: int) -> GpuBuilder:
        return GpuBuilder(replace(self.value, reconfigured_today=n))

    def obj(self) -> demand.Gpu:
        return self.value


def gpu(node: str, index: int = 0, model: str = H100) -> GpuBuilder:
    """An idle H100 with MIG disabled until told otherwise."""
    return GpuBuilder(demand.Gpu(node, index, model, ()))


def _names(profiles: dict[str, int]) -> dict[str, int]:
    """Keyword-safe profile names: ``p1g_10gb=7`` is ``1g.10gb: 7``."""
    return {k.removeprefix("p").replace("_", "."): v for k, v in profiles.items()}


def want(profile: str, pods: int, minutes: float) -> demand.Pending:
    return demand.Pending(profile, pods, timedelta(minutes=minutes))


def bounds(**over: object) -> Bounds:
    base = Bounds(pend_threshold=timedelta(minutes=5), per_gpu_per_day=1)
    return replace(base, **over)  # type: ignore[arg-type]


def applied(gpus: list[demand.Gpu], decision: choice.Decision) -> list[demand.Gpu]:
    """The GPUs once ``decision`` rolled out: each changed one at its new layout, counted as
    changed once today; its pods (none: it was idle) and the others as they were."""
    changed = {c.gpu.name: c.layout for c in decision.changes}
    return [
        replace(g, layout=changed[g.name], reconfigured_today=g.reconfigured_today + 1)
        if g.name in changed
        else g
        for g in gpus
    ]
