"""The bounds a person declares in Git, and the static checks on them.

The autopilot chooses layouts only inside these: the profiles each GPU model may carry, a
pool-wide minimum and maximum count per profile, how long demand must pend before it counts,
at most how many reconfigurations per GPU per day, and an off switch. ``problems`` says what
is wrong with bounds that no cluster could make right (an unknown profile, min > max, a
profile a model cannot host); the API server refuses those where a rule can.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from tessera.domain.geometry import catalog

DEFAULT_THRESHOLD = timedelta(minutes=5)  # long enough for a scheduling pass and a pod ending


@dataclass(frozen=True, slots=True)
class Bounds:
    """What the autopilot may do; a model not named in ``profiles`` may carry its base profiles."""

    enabled: bool = True
    profiles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # model id -> allowed
    minimum: Mapping[str, int] = field(default_factory=dict)  # profile -> instances in the pool
    maximum: Mapping[str, int] = field(default_factory=dict)
    pend_threshold: timedelta = DEFAULT_THRESHOLD
    per_gpu_per_day: int = 1

    def allowed(self, model: catalog.GpuModel) -> tuple[str, ...]:
        """The profiles ``model`` may carry: those declared, else every one without a media
        extension (``+me`` owns the GPU's only media engines: a person asks for it by name)."""
        declared = self.profiles.get(model.id)
        if declared is not None:
            return tuple(p for p in model.profile_names if p in set(declared))
        return tuple(p.name for p in model.profiles if not p.media_extension)


def problems(bounds: Bounds) -> tuple[str, ...]:
    """Every static problem of ``bounds``, each a sentence naming the field; () when sound."""
    out: list[str] = []
    for model_name, names in sorted(bounds.profiles.items()):
        try:
            model = catalog.resolve(model_name)
        except catalog.UnknownModelError as err:
            out.append(f"profiles: {err}")
            continue
        unknown = [n for n in names if model.profile(n) is None]
        if unknown:
            out.append(
                f"profiles[{model_name}]: {model.id} cannot host {', '.join(unknown)}; "
                f"its profiles are {', '.join(model.profile_names)}"
            )
    for name, low in sorted(bounds.minimum.items()):
        high = bounds.maximum.get(name)
        if low < 0:
            out.append(f"minimum[{name}] is {low}; counts cannot be negative")
        if high is not None and low > high:
            out.append(f"minimum[{name}] is {low}, above maximum[{name}] {high}")
    for name, high in sorted(bounds.maximum.items()):
        if high < 0:
            out.append(f"maximum[{name}] is {high}; counts cannot be negative")
    if bounds.per_gpu_per_day < 0:
        out.append(
            f"reconfigurationsPerGpuPerDay is {bounds.per_gpu_per_day}; it cannot be negative"
        )
    if bounds.pend_threshold < timedelta(0):
        out.append("pendThreshold cannot be negative")
    return tuple(out)
