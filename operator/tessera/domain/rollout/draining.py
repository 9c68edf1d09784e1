"""One bounded, non-blocking drain pass over one node (docs/facts/drain.md §One drain pass).

Each reconcile recomputes the pods to evict from a fresh observation (pods that
slipped onto the cordoned node are simply evicted next), evicts those it may,
and returns. It never waits: the controller requeues. Double evictions are
impossible by construction: a pod whose eviction was accepted carries a
``deletionTimestamp`` and is only waited on; a rejected eviction (429) is
retried after a back-off persisted in the node's state, so a PDB that never
yields costs one request per minute, not a hot loop.

Every pod a PDB holds up is named at once (``held``), with the PDB, so the
pool says who blocks the drain long before ``drain.timeout`` turns it into a
stall: the PDBs are matched against the pod's labels in this observation, the
same way the Eviction API picks them.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tessera.api.v1alpha1.common import DrainSpec
from tessera.domain.rollout import actions as act
from tessera.domain.rollout import selection
from tessera.domain.rollout.state import Eviction, NodeState
from tessera.domain.rollout.views import PdbView, PodView

BACKOFF_BASE_S = 5.0
BACKOFF_CAP_S = 60.0


def backoff(attempts: int) -> timedelta:
    """5, 10, 20, 40, then 60 s; kubectl's 5 s floor (docs/facts/drain.md §Eviction retries)."""
    return timedelta(seconds=min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** max(0, attempts - 1)))


@dataclass(frozen=True)
class Held:
    """One pod a PodDisruptionBudget keeps on the node: what the pool's message names."""

    pod: str  # namespace/name
    pdb: str  # namespace/name; "" when no PDB in this observation selects the pod
    refused: bool  # an eviction was sent and the API server said no (429)
    uid: str = ""  # this incarnation of the pod: a pod recreated under its name is another

    def __str__(self) -> str:
        by = f"PodDisruptionBudget {self.pdb}" if self.pdb else "a PodDisruptionBudget"
        if self.refused and not self.pdb:  # e.g. KubeVirt migrating the VM: the pod leaves later
            return (
                f"eviction of pod {self.pod} refused (429) with no PodDisruptionBudget selecting "
                "it: an admission webhook (KubeVirt live-migrating a VM) or a budget not seen "
                "yet; retrying"
            )
        if self.refused:
            return f"eviction of pod {self.pod} refused by {by}; retrying"
        return f"eviction of pod {self.pod} blocked by {by} (0 disruptions allowed)"


@dataclass
class DrainPass:
    evictions: dict[str, Eviction]
    actions: list[act.Action] = field(default_factory=list)
    remaining: list[PodView] = field(default_factory=list)
    hard: list[str] = field(default_factory=list)
    soft: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    blocking_pdbs: set[str] = field(default_factory=set)
    held: list[Held] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return not self.remaining

    def blocker(self) -> str:
        """The sentence a person needs: the PDB or the pod that holds the drain up."""
        return "; ".join(self.hard or self.soft or self.waiting) or "pods remain"


def drain_pass(
    state: NodeState,
    *,
    pods: Iterable[PodView],
    pdbs: list[PdbView],
    pdb_budget: MutableMapping[str, int],
    drain: DrainSpec,
    now: datetime,
    timed_out: bool,
) -> DrainPass:
    """Plan this pass's evictions for one node; ``pdb_budget`` is shared by all nodes of a pass.

    ``pods`` are those that must leave (``scope.leaving``): selected, and on a changed GPU."""
    chosen = list(pods)
    live = {p.key for p in chosen}
    out = DrainPass({k: v for k, v in state.evictions.items() if k in live}, remaining=chosen)
    for pod in chosen:
        if pod.deletion_timestamp is not None:
            note = f"pod {pod.ref} is terminating"
            (out.soft if timed_out else out.waiting).append(note)
            continue
        hard = selection.hard_blocker(pod, drain, pdbs)
        if hard:
            out.hard.append(hard)
            continue
        guards = selection.guarding(pod, pdbs)
        guard = guards[0] if guards and pod.phase == "Running" else None
        record = out.evictions.get(pod.key)
        if guard is not None and pdb_budget.get(guard.ref, 0) <= 0:
            out.blocking_pdbs.add(guard.ref)
            out.held.append(Held(pod.ref, guard.ref, refused=False, uid=pod.uid))
            out.soft.append(f"pdb {guard.ref} allows 0 disruptions (pod {pod.ref})")
            if timed_out and drain.force and not (record and record.deleted):
                out.evictions[pod.key] = Eviction(
                    record.attempts if record else 0, now, deleted=True
                )
                reason = f"drain timed out and drain.force is set; pdb {guard.ref} still blocks"
                out.actions.append(
                    act.DeletePod(pod.node, pod.namespace, pod.name, pod.uid, reason)
                )
            continue
        refused = Held(pod.ref, guards[0].ref if guards else "", refused=True, uid=pod.uid)
        if record is not None and not record.deleted:  # sent before, and the pod is still here
            out.held.append(refused)
        if record is not None and now < record.last + backoff(record.attempts):
            out.waiting.append(str(refused))
            continue
        attempts = record.attempts + 1 if record else 1
        out.evictions[pod.key] = Eviction(attempts, now)
        if guard is not None:
            pdb_budget[guard.ref] -= 1
        why = "accelerator pod" if pod.requests_accelerator else "matches drain.podSelector"
        retry = f", attempt {attempts}" if attempts > 1 else ""
        reason = f"drain {pod.node} for layout {state.target.id}: {why}{retry}"
        out.actions.append(act.Evict(pod.node, pod.namespace, pod.name, pod.uid, reason))
    return out
