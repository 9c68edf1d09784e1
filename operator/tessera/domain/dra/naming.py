"""Stable DeviceClass names and selectors (docs/dra.md; quota and ``tessera plan`` use them).

DRA has no node attribute on a device, so a class cannot be narrowed to one pool's nodes:
classes are per *profile*, shared by every DRA pool whose geometry provides it. Selectors
read ``device.driver`` first, then the type, then the one attribute that type is known to
carry: an attribute a device lacks is a CEL runtime error that blocks the pod (see
docs/dra.md §Selectors).
"""

from __future__ import annotations

DRIVER = "gpu.nvidia.com"
API = "resource.k8s.io/v1"
DEVICECLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
RESOURCESLICES = "/apis/resource.k8s.io/v1/resourceslices"
RESOURCECLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
DECLARED_BY_ANNOTATION = "tessera.io/declared-by"
OPAQUE_API_VERSION = "resource.nvidia.com/v1beta1"
SUFFIX = ".tessera.io"
SHARING_SUFFIX = ".sharing.tessera.io"
GPU = "gpu"
"""What a whole-GPU class selects (``status.deviceClasses[].selects``); else a MIG profile."""
MAX_NAME = 253


def base(selects: str) -> str:
    """``gpu`` or ``mig-<profile>`` with ``+`` → ``-`` (``1g.10gb+me`` → ``mig-1g.10gb-me``)."""
    return GPU if selects == GPU else "mig-" + selects.replace("+", "-")


def geometry_class(selects: str) -> str:
    """``gpu.tessera.io``, ``mig-1g.10gb.tessera.io``."""
    return base(selects) + SUFFIX


def selects_of(class_name: str) -> str | None:
    """What a class of Tessera's selects (``gpu`` or a MIG profile), read back from its name
    (``geometry_class``, or ``sharing_class`` whose policy name may hold dots); None for a
    class Tessera does not name."""
    if class_name.endswith(SHARING_SUFFIX):
        head = "." + class_name.removesuffix(SHARING_SUFFIX)
        if head.endswith("." + GPU) and len(head) > len(GPU) + 2:
            return GPU
        at = head.rfind(".mig-")
        kind = head[at + 1 :] if at > 0 else ""
    elif class_name.endswith(SUFFIX):
        kind = class_name.removesuffix(SUFFIX)
        if kind == GPU:
            return GPU
    else:
        return None
    profile = kind.removeprefix("mig-") if kind.startswith("mig-") else ""
    if not profile:
        return None
    return profile[: -len("-me")] + "+me" if profile.endswith("-me") else profile


def sharing_class(policy: str, selects: str) -> str:
    """``<policy>.gpu.sharing.tessera.io``, ``<policy>.mig-1g.10gb.sharing.tessera.io``."""
    return f"{policy}.{base(selects)}{SHARING_SUFFIX}"


def declarer(kind: str, name: str) -> str:
    """How a declaring object is named in ``tessera.io/declared-by``: ``Kind/name``."""
    return f"{kind}/{name}"


def _attribute(name: str) -> str:
    return f"device.attributes['{DRIVER}'].{name}"


def selector(selects: str) -> str:
    """The one CEL selector of a class: driver, then type, then the guarded profile."""
    driver = f"device.driver == '{DRIVER}'"
    if selects == GPU:
        return f"{driver} && {_attribute('type')} == 'gpu'"
    return f"{driver} && {_attribute('type')} == 'mig' && {_attribute('profile')} == '{selects}'"
