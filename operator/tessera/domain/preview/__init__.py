"""``tessera plan``: what applying some manifests would do to a cluster, before anything is written.

A reviewer reads, per pool, the nodes that change (old → new layout or
sharing config), the pods that would be evicted, the PDBs that would block,
the capacity the pool ends with, the tenants whose quota would then be
overcommitted, and the agent ConfigMaps as a diff. Everything is computed by
the functions the operator runs (``tessera.domain.cluster.objects`` builds the same
views, ``rollout.plan`` gives the same hash), from a ``Cluster`` — raw objects
read from the API server or from a snapshot file. Pure: no I/O here.

The modules form a chain, each importing only those before it (import-linter's
"Preview is a chain" contract): ``model`` (the inputs: ``Cluster``, ``Locations``),
``results`` (``ObjectPreview``, ``Deletion``, ``Preview``), ``geometry_configs`` and
``geometry`` (NodePoolGeometry), ``sharing_configs`` and ``sharing`` (SharingPolicy),
``dra`` (DeviceClass writes and the devices DRA pools' ResourceSlices will hold),
``quota`` (capacity and TenantQuota), ``prune_pools``, ``prune_sharing`` and ``prune``
(deletions, with ``--prune``), then ``compose`` (``preview``, the whole) beside ``text``
(the human rendering and the JSON). This package re-exports what the CLI calls.
"""

from __future__ import annotations

from tessera.domain.preview.compose import preview
from tessera.domain.preview.model import Cluster, Locations, Raw
from tessera.domain.preview.results import (
    ClassChange,
    Deletion,
    NodeChange,
    ObjectPreview,
    Preview,
    Release,
    TenantImpact,
)
from tessera.domain.preview.text import as_json, render

__all__ = [
    "ClassChange",
    "Cluster",
    "Deletion",
    "Locations",
    "NodeChange",
    "ObjectPreview",
    "Preview",
    "Raw",
    "Release",
    "TenantImpact",
    "as_json",
    "preview",
    "render",
]
