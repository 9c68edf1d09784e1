"""tessera.domain.dra: Tessera's DeviceClasses for pools with ``allocation: DRA``, decided purely.

* ``naming``    stable class names and their guarded CEL selectors (driver, type, attribute);
* ``sharing``   a SharingPolicy's opaque ``GpuConfig`` / ``MigDeviceConfig``, checked with the
                NVIDIA driver's own ``Validate`` rules and the pool's declared feature gates;
* ``selfcheck`` each generated selector checked before it is sent (length, guarded reads);
* ``offer``     what a pool provides on its nodes' GPU models (layouts validated), or why not;
* ``classes``   the desired set from every pool and policy (``desired_classes``);
* ``diff``      observed Tessera-owned classes → creates, updates, deletes, name conflicts;
                what the API server stored against what was sent (``dropped``);
* ``slices``    devices of the driver ``gpu.nvidia.com`` counted from ResourceSlices;
* ``verdicts``  each declarer's conditions after a sync (Conflict, FieldDropped, refused,
                WaitingForDriver) and a pool's ``status.deviceClasses``.
"""

from tessera.domain.dra.classes import (
    ClassProblem,
    DesiredClass,
    DesiredClasses,
    desired_classes,
    holding,
)
from tessera.domain.dra.diff import ClassChanges, declarers, diff, dropped, dropped_message, owned
from tessera.domain.dra.naming import DECLARED_BY_ANNOTATION, DEVICECLASSES, DRIVER, RESOURCESLICES
from tessera.domain.dra.offer import PoolInput, pool_input, provides

__all__ = [
    "DECLARED_BY_ANNOTATION",
    "DEVICECLASSES",
    "DRIVER",
    "RESOURCESLICES",
    "ClassChanges",
    "ClassProblem",
    "DesiredClass",
    "DesiredClasses",
    "PoolInput",
    "declarers",
    "desired_classes",
    "diff",
    "dropped",
    "dropped_message",
    "holding",
    "owned",
    "pool_input",
    "provides",
]
