"""tessera.domain.dra: the DeviceClasses Tessera owns for pools with ``allocation: DRA``, decided purely.

* ``naming``    stable class names and their guarded CEL selectors (driver, type, attribute);
* ``sharing``   a SharingPolicy's opaque ``GpuConfig`` / ``MigDeviceConfig``, checked with the
                NVIDIA driver's own ``Validate`` rules and the pool's declared feature gates;
* ``selfcheck`` each generated selector checked before it is sent (length, guarded reads);
* ``classes``   the desired set from every pool and policy (``desired_classes``);
* ``diff``      observed Tessera-owned classes → creates, updates, deletes, name conflicts;
                what the API server stored against what was sent (``dropped``);
* ``slices``    devices of the driver ``gpu.nvidia.com`` counted from ResourceSlices;
* ``verdicts``  each declarer's conditions after a sync (Conflict, FieldDropped, refused,
                WaitingForDriver) and a pool's ``status.deviceClasses``.
"""

from .classes import DesiredClass, DesiredClasses, PoolInput, Problem, desired_classes, provides
from .diff import ClassChanges, diff, dropped, dropped_message, owned
from .naming import DECLARED_BY_ANNOTATION, DEVICECLASSES, DRIVER, RESOURCESLICES

__all__ = [
    "DECLARED_BY_ANNOTATION",
    "DEVICECLASSES",
    "DRIVER",
    "RESOURCESLICES",
    "ClassChanges",
    "DesiredClass",
    "DesiredClasses",
    "PoolInput",
    "Problem",
    "desired_classes",
    "diff",
    "dropped",
    "dropped_message",
    "owned",
    "provides",
]
