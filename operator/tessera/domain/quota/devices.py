"""What the cluster's ResourceSlices offer, per DeviceClass Tessera can read.

A TenantQuota on ``<class>.deviceclass.resource.k8s.io/devices`` is compared
with the devices that class can select. Tessera cannot evaluate an arbitrary
CEL selector, so it counts only classes whose selector is exactly one it
writes itself (``tessera.domain.dra``): the whole GPUs of NVIDIA's driver
(``type == 'gpu'``) or its MIG devices of one profile (``type == 'mig'`` and
``profile == P``). Any other class, or one with more than one selector, has
no known capacity, and ``capacity`` leaves it out rather than guess. A class
that does not exist offers nothing (no claim of it can be allocated): 0.

Slices are counted as the scheduler reads them (``dra.slices.selected``): per
driver pool only the slices of its newest ``generation``, once all of them are published.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tessera.domain.dra import naming
from tessera.domain.dra import slices as dra_slices
from tessera.domain.quota.names import device_class

_PROFILE = re.compile(r"\.profile == '([^']+)'")
Raw = Mapping[str, Any]


def selects(device_class_obj: Raw) -> str | None:
    """What a DeviceClass selects ("gpu" or a MIG profile) when its selector is Tessera's form."""
    spec = device_class_obj.get("spec") or {}
    chosen = spec.get("selectors") or []
    if len(chosen) != 1:
        return None
    expression = ((chosen[0] or {}).get("cel") or {}).get("expression")
    if not isinstance(expression, str):
        return None
    found = _PROFILE.search(expression)
    candidate = found.group(1) if found else naming.GPU
    return candidate if naming.selector(candidate) == expression else None


def capacity(
    resources: Iterable[str], classes: Iterable[Raw], slices: Iterable[Raw]
) -> dict[str, int]:
    """Per ``<class>.deviceclass.resource.k8s.io/devices`` resource whose class Tessera can read,
    the devices the slices offer it; resources of unreadable classes are left out."""
    by_name = {c["metadata"]["name"]: c for c in classes}
    current = list(slices)
    nodes = {str((s.get("spec") or {}).get("nodeName", "")) for s in current}
    devices = dra_slices.selected(current, nodes)
    out: dict[str, int] = {}
    for resource in resources:
        name = device_class(resource)
        if name is None:
            continue
        if name not in by_name:
            out[resource] = 0
        elif (what := selects(by_name[name])) is not None:
            out[resource] = devices.get(what, 0)
    return out
