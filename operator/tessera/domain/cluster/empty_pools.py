"""A NodePoolGeometry whose nodeSelector matches no node: never a green light.

"All 0 nodes match their layout" is vacuously true and hides a typo in the
pool label, so an empty pool is ``Stalled``, reason ``NoNodes`` (Argo CD:
Degraded). Stalled rather than Reconciling: nothing is in progress, and
nothing will be until someone labels a node or fixes the selector; a
Reconciling pool would look like work under way, keep ``argocd app wait
--health`` and Flux ``wait`` hanging until their timeout, and never alert.
A pool scaled to zero on purpose reads Degraded too, which says exactly what
is true: no node runs its layout.

Its layout is still checked against the models the selector names
(``nvidia.com/gpu.product``, ``nvidia.com/gpu.count``, the Ascend chip and
count labels), by the same per-node rules a real node would get, so a layout
impossible on the named model is refused before the first node arrives. And
before any of that, a MIG profile name no model of the catalog has (the CRD
refuses it; a pool stored before that rule may hold one) is a spec error,
``InvalidSpec``, so a typo never hides behind ``NoNodes``.
"""

from __future__ import annotations

from tessera.api import constants as c
from tessera.api.v1alpha1 import rules as manifest_rules
from tessera.api.v1alpha1.common import LabelSelector
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.base import selectors
from tessera.domain.base.conditions import Verdict
from tessera.domain.cluster import pools

DEFAULT_DEVICES = 8  # devices assumed per node when the selector does not name a count


def named(selector: LabelSelector, key: str) -> tuple[str, ...]:
    """The values the selector requires for ``key`` (``matchLabels`` or ``In``)."""
    if key in selector.match_labels:
        return (selector.match_labels[key],)
    for requirement in selector.match_expressions:
        if requirement.key == key and requirement.operator == "In":
            return tuple(sorted(requirement.values))
    return ()


def layout_problem(pool: str, spec: NodePoolGeometrySpec) -> str:
    """Why the layout is impossible on a model the selector names; ``""`` when it fits all."""
    model_key, count_key = (
        (c.NPU_CHIP_NAME_LABEL, c.NPU_COUNT_LABEL)
        if pools.is_ascend(spec)
        else (c.GPU_PRODUCT_LABEL, c.GPU_COUNT_LABEL)
    )
    counts = [n for n in named(spec.node_selector, count_key) if n.isdigit()]
    for model in named(spec.node_selector, model_key):
        for count in counts or [str(DEFAULT_DEVICES)]:
            labels = {model_key: model, count_key: count}
            target = pools.target_for(pool, spec, labels, {})
            if target.desired.invalid:
                return f"{model_key}={model} ({count} devices): {target.desired.invalid}"
    return ""


def verdict(pool: str, spec: NodePoolGeometrySpec) -> Verdict:
    """The verdict of a pool that selects no node."""
    where = f"spec.nodeSelector ({selectors.describe(spec.node_selector)}) matches no node"
    for i, layout in enumerate(spec.mig.layouts if spec.mig else ()):
        unknown = manifest_rules.unknown_profiles(layout.profiles)
        if unknown:
            message = f"spec.mig.layouts[{i}].profiles: {unknown} (and {where} yet)"
            return Verdict("stalled", "InvalidSpec", message)
    problem = layout_problem(pool, spec)
    if problem:
        message = f"{where}, and the layout is impossible on the model it names: {problem}"
        return Verdict("stalled", "InvalidGeometryForModel", message)
    return Verdict(
        "stalled", "NoNodes", f"{where}: no node runs this layout; label nodes or fix the selector"
    )
