"""The pod-contract part of a preview: each SharingPolicy's ValidatingAdmissionPolicy and
binding, created, updated or deleted.

Computed as the operator does (``tessera.domain.admission``): the contract of every policy
once the manifests are applied, from the chips of the nodes it governs then
(``sharing.assignment``), against the objects of those names in the cluster; a policy that
leaves the cluster takes its own objects along. A wanted name held by an object Tessera does
not own is a conflict (the policy would be ``Stalled``, reason ``Conflict``: exit 1), and so
are two policies whose contracts contradict each other (``admission.overlap``: neither is
written, objects of theirs already there are deleted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tessera.api import constants as c
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain import admission
from tessera.domain.cluster import objects as observe
from tessera.domain.dra.naming import declarer
from tessera.domain.preview.model import Cluster, Raw
from tessera.domain.preview.results import AdmissionChange
from tessera.domain.preview.sharing import policies
from tessera.domain.sharing.assignment import assign
from tessera.domain.sharing.nodes import NodeFacts

KIND = "SharingPolicy"
KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


@dataclass(frozen=True)
class AdmissionPreviews:
    changes: tuple[AdmissionChange, ...] = ()
    conflicts: tuple[str, ...] = ()


def previews(before: Cluster, after: Cluster) -> AdmissionPreviews:
    facts = {n["metadata"]["name"]: observe.sharing_facts(n) for n in after.nodes}
    wanted = policies(after)
    governs = assign(wanted, facts.values())
    names = {*before.of_kind(KIND), *(p.name for p in wanted)}
    specs = {p.name: p.spec for p in wanted}
    contracts = {
        name: admission.contract_of(
            name, spec, _chips(facts, governs.nodes_of(name)), _names(after, spec)
        )
        for name, spec in specs.items()
    }
    overlaps = admission.overlaps(k for k in contracts.values() if k is not None)
    changes: list[AdmissionChange] = []
    conflicts: list[str] = []
    for name in sorted(names):
        if name in after.of_kind(KIND) and name not in specs:
            continue  # a spec that does not parse: its objects stay; its preview says why
        contract = None if name in overlaps else contracts.get(name)
        if name in overlaps:
            text = admission.overlap_message(declarer(KIND, name), overlaps[name])
            conflicts.append(f"{KIND}/{name} would be Stalled, reason Conflict: {text}")
        desired = [admission.policy(contract), admission.binding(contract)] if contract else []
        found = admission.diff(declarer(KIND, name), desired, _observed(before, name), KINDS)
        says = admission.summary(contract) if contract else ""
        for change in found.writes:
            action = f"{contract.action}: {says}" if contract and change.verb != "delete" else ""
            changes.append(AdmissionChange(change.kind, change.name, change.verb, action))
        conflicts += [
            f"{taken} exists and is not Tessera's: {KIND}/{name} would be Stalled, reason Conflict"
            for taken in found.conflicts
        ]
    return AdmissionPreviews(tuple(changes), tuple(conflicts))


def _chips(facts: Mapping[str, NodeFacts], nodes: Iterable[str]) -> set[str]:
    return {facts[n].labels.get(c.NPU_CHIP_NAME_LABEL, "") for n in nodes}


def _names(cluster: Cluster, spec: SharingPolicySpec) -> dict[str, str]:
    """Each scheduler's name, HAMi's from the Deployment the policy names (as the operator)."""
    if spec.scheduler is None:
        return admission.scheduler_names(None)
    ref = spec.scheduler.hami.deployment
    found = [
        d
        for d in cluster.deployments
        if (d["metadata"].get("namespace"), d["metadata"]["name"]) == (ref.namespace, ref.name)
    ]
    return admission.scheduler_names(found[0] if found else None)


def _observed(cluster: Cluster, policy: str) -> list[Raw]:
    target = admission.name_of(policy)
    return [o for o in cluster.admission if o["metadata"]["name"] == target]
