"""Which pods a node change must evict, and which PodDisruptionBudgets guard them.

The default follows the GPU Operator's predicate (docs/facts/drain.md §Pods to evict): pods that
request accelerator resources, because only they hold the device. A custom
``drain.podSelector`` *adds* pods (for example ones that reach the GPU through
a runtime class without a request); it never removes accelerator pods, since a
pod left holding the device makes the agent fail the change. DaemonSet pods,
mirror pods, finished pods and pods labelled ``tessera.io/drain.skip=true``
(Tessera's own agents) are never selected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tessera.api import constants
from tessera.api.v1alpha1.common import DrainSpec, LabelSelector
from tessera.domain.rollout.views import PdbView, PodView


def matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: every matchLabels pair and every expression holds."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        value = labels.get(req.key)
        ok = {
            "In": present and value in req.values,
            "NotIn": not present or value not in req.values,
            "Exists": present,
            "DoesNotExist": not present,
        }[req.operator]
        if not ok:
            return False
    return True


def _custom(drain: DrainSpec) -> LabelSelector | None:
    """An empty selector means the default, as docs/geometry.md §The spec reads it."""
    sel = drain.pod_selector
    if sel is None or (not sel.match_labels and not sel.match_expressions):
        return None
    return sel


def selected(pods: Iterable[PodView], drain: DrainSpec) -> list[PodView]:
    """The pods on one node that must be gone before its device changes, sorted by name."""
    custom = _custom(drain)
    out = []
    for pod in pods:
        if pod.is_daemonset or pod.is_mirror or pod.terminal:
            continue
        if pod.labels.get(constants.DRAIN_SKIP_LABEL) == "true":
            continue
        if pod.requests_accelerator or (custom is not None and matches(custom, pod.labels)):
            out.append(pod)
    return sorted(out, key=lambda p: (p.namespace, p.name))


def guarding(pod: PodView, pdbs: Iterable[PdbView]) -> list[PdbView]:
    """The PDBs of the pod's namespace whose selector matches it."""
    return [
        pdb
        for pdb in pdbs
        if pdb.namespace == pod.namespace
        and pdb.selector is not None
        and matches(pdb.selector, pod.labels)
    ]


def hard_blocker(pod: PodView, drain: DrainSpec, pdbs: Iterable[PdbView]) -> str:
    """Why no amount of waiting lets this pod be evicted (kubectl's filters), or ``""``."""
    if pod.uses_empty_dir and not drain.delete_empty_dir_data:
        return f"pod {pod.ref} uses emptyDir; set drain.deleteEmptyDirData to evict it"
    if pod.owner_kind is None and not drain.force:
        return f"pod {pod.ref} has no controller and would not come back; set drain.force"
    guards = guarding(pod, pdbs)
    if len(guards) > 1:
        names = ", ".join(sorted(p.ref for p in guards))
        return f"pod {pod.ref} is selected by several PDBs ({names}); the Eviction API refuses it"
    return ""
