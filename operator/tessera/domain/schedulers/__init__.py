"""tessera.domain.schedulers: the scheduler side of HAMi slices, decided purely.

A SharingPolicy's ``spec.scheduler`` names the scheduler that allocates its slices (HAMi's
or Volcano's); Tessera keeps that scheduler's config consistent with all the policies.

* ``versions``  the version a component runs: declared, or from its Deployment's image tag;
* ``demands``   each policy's ask (chips, soft slicing, NVIDIA settings, versions), and the
                asks grouped per Volcano scheduler config (``VolcanoDemand``);
* ``outcome``   one policy's scheduler-side verdict and ``status.scheduler``, merged over
                the parts (HAMi's device config, Volcano's) and with the node side;
* ``vnpus``     HAMi's ``vnpus`` chip entries as its chart ships them, per version and shape;
* ``traps``     known version traps of the schedulers' configs;
* ``yaml_text`` edits of a YAML text that keep every line they do not touch;
* ``hami/``     HAMi: its scheduler's ``device-config.yaml`` (joined asks, edits in place,
                loadability) and its device plugins' per-node configs (``nodes``);
* ``volcano/``  Volcano's ``volcano-scheduler.conf`` and its map of known geometries.
"""

from tessera.domain.schedulers.demands import ObjectKey, PolicyDemand, VolcanoDemand, VolcanoDemands
from tessera.domain.schedulers.outcome import SchedulerOutcome
from tessera.domain.schedulers.versions import Detected, Version, VersionUnknownError

__all__ = [
    "Detected",
    "ObjectKey",
    "PolicyDemand",
    "SchedulerOutcome",
    "Version",
    "VersionUnknownError",
    "VolcanoDemand",
    "VolcanoDemands",
]
