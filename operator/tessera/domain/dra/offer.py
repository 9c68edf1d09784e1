"""What a DRA pool's geometry provides on the GPUs its nodes really have, or why it provides nothing.

Read from the spec alone (``provides``), a layout names profiles whatever the GPU model: a
``1g.5gb`` layout on H100-80GB nodes, or a layout over-filling a GPU, would still yield its
class although the pool itself refuses it (``InvalidGeometryForModel``). So when the pool's
nodes are known (GFD ``nvidia.com/gpu.product`` and ``nvidia.com/gpu.count``, ``PoolInput.
models``) each kind of node is validated the way the rollout validates it
(``geometry.capacity.validate_mig_node``, memoised), and the pool provides what its valid nodes'
placements hold — a GPU left without instances is a whole GPU. When no node's layout is valid
the pool is refused: a ``ClassProblem`` naming ``spec.mig.layouts[i]`` and the model, and its
classes are held, not written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tessera.api import constants as c
from tessera.api.v1alpha1.devices import parse
from tessera.api.v1alpha1.nodepoolgeometry import MigLayout, NodePoolGeometrySpec
from tessera.domain.base import selectors
from tessera.domain.dra.naming import GPU
from tessera.domain.geometry import capacity, catalog

INVALID_GEOMETRY = "InvalidGeometryForModel"


@dataclass(frozen=True)
class PoolInput:
    """A pool as class generation needs it: its spec and, when known, the most GPUs a node
    of it has (GFD ``nvidia.com/gpu.count``), which tells whether explicit layouts leave a
    GPU whole; None (no node known) counts such a GPU as left whole. ``models``: (GFD
    ``nvidia.com/gpu.product``, GPU count) of its nodes, against which its layouts are
    validated (``offer``); empty: the spec alone decides."""

    spec: NodePoolGeometrySpec
    gpus: int | None = None
    models: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Offer:
    """What a pool provides (sorted), or why it provides nothing (``field``, ``message``)."""

    selects: tuple[str, ...]
    field: str = ""
    message: str = ""


def provides(spec: NodePoolGeometrySpec, gpus: int | None = None) -> tuple[str, ...]:
    """What the spec provides, sorted: MIG profiles, and ``gpu`` when a GPU keeps MIG off."""
    if spec.mig is None:
        return (GPU,)
    profiles = {p for layout in spec.mig.layouts for p in layout.profiles}
    whole = any(not layout.profiles for layout in spec.mig.layouts)
    indexes = [parse(layout.devices) for layout in spec.mig.layouts]
    if all(found is not None for found in indexes):  # no devices: all: some GPU may be unnamed
        named = {i for found in indexes for i in found or ()}
        whole = whole or gpus is None or not set(range(gpus)) <= named
    return tuple(sorted(profiles | ({GPU} if whole else set())))


def offer(spec: NodePoolGeometrySpec, gpus: int | None, models: Sequence[tuple[str, int]]) -> Offer:
    """What the pool provides on its nodes' ``models`` ((GFD product, GPU count) of each kind
    of node); from the spec alone when no node is known or MIG is off."""
    known = [(product, count) for product, count in models if product and count > 0]
    if spec.mig is None or not known:
        return Offer(provides(spec, gpus))
    layouts = spec.mig.layouts
    found: set[str] = set()
    refused: tuple[str, str] | None = None
    for product, count in sorted(set(known)):
        try:
            model = catalog.resolve(product)
        except catalog.UnknownModelError as err:
            refused = refused or ("spec.mig.layouts", str(err))
            continue
        verdict = capacity.validate_mig_node(model, count, layouts, spec.mig_strategy)
        if not verdict.valid:
            where = _culprit(model, count, layouts, spec)
            text = f"not valid for GPU model {model.id} ({count} GPUs per node): {verdict.reason}"
            refused = refused or (where, text)
            continue
        for placed in verdict.placements:
            found.update(i.profile for i in placed.instances)
            if not placed.instances:
                found.add(GPU)
    if found or refused is None:
        return Offer(tuple(sorted(found)))
    return Offer((), *refused)


def _culprit(
    model: catalog.GpuModel, count: int, layouts: Sequence[MigLayout], spec: NodePoolGeometrySpec
) -> str:
    """``spec.mig.layouts[i]``: the first layout that makes the layouts before it invalid."""
    for i in range(len(layouts)):
        if not capacity.validate_mig_node(model, count, layouts[: i + 1], spec.mig_strategy).valid:
            return f"spec.mig.layouts[{i}]"
    return "spec.mig.layouts"


def pool_input(spec: NodePoolGeometrySpec, nodes: Iterable[Mapping[str, str]]) -> PoolInput:
    """The pool as class generation sees it from the labels of every node: those its
    nodeSelector matches give the most GPUs a node has and their (product, count) kinds.
    A device-plugin pool needs neither (it declares no class)."""
    if spec.allocation != "DRA":
        return PoolInput(spec)
    counts: list[int] = []
    models: set[tuple[str, int]] = set()
    for labels in nodes:
        text = str(labels.get(c.GPU_COUNT_LABEL, "0"))
        if not text.isdigit() or not selectors.matches(spec.node_selector, labels):
            continue
        counts.append(int(text))
        product = labels.get(c.GPU_PRODUCT_LABEL)
        if product and int(text) > 0:
            models.add((product, int(text)))
    return PoolInput(spec, max(counts) if counts else None, tuple(sorted(models)))
