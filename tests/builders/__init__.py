"""Test builders shared by unit and integration tests, in kueue's wrapper style.

Each wrapper starts from the smallest valid object and sets one field per call; ``obj()``
returns the raw manifest (a dict, as the API server and ``Cluster.of`` take it)::

    PodWrapper("p").namespace("ml").node("n1").limits({"nvidia.com/gpu": 1}).obj()

Unit tests of the rollout engine, which take views rather than manifests, build them with
:mod:`builders.views`. Helpers that call the API (create a namespace, wait for pods) stay in
``tests/integration`` and build their objects here. ``tests/`` is on ``sys.path`` (pytest's
``pythonpath``), so both levels import ``builders``.
"""

from .base import Raw, Wrapper
from .cluster import NamespaceWrapper, NodeWrapper
from .tessera import (
    LAYOUT_A,
    LAYOUT_A100,
    LAYOUT_B,
    QUICK_ROLLOUT,
    GeometryWrapper,
    SharingPolicyWrapper,
    TenantQuotaWrapper,
    TesseraWrapper,
    custom,
)
from .workloads import DeploymentWrapper, PdbWrapper, PodWrapper

__all__ = [
    "LAYOUT_A",
    "LAYOUT_A100",
    "LAYOUT_B",
    "QUICK_ROLLOUT",
    "DeploymentWrapper",
    "GeometryWrapper",
    "NamespaceWrapper",
    "NodeWrapper",
    "PdbWrapper",
    "PodWrapper",
    "Raw",
    "SharingPolicyWrapper",
    "TenantQuotaWrapper",
    "TesseraWrapper",
    "Wrapper",
    "custom",
]
