"""tessera.domain.admission: a SharingPolicy's pod contract, enforced by the API server.

A slice of a HAMi-managed NPU or GPU is only allocated when every link of the chain agrees:
the pod must name the scheduler that allocates slices, run under the runtime class that
mounts them, and carry the annotation that selects soft slicing. Tessera guards that with a
``ValidatingAdmissionPolicy`` and its binding per policy (``admissionregistration.k8s.io/v1``,
CEL, no webhook) that warn about — or deny — pods and workload templates missing a piece.

* ``contract``   what a policy's pods must carry (pure: spec + the chips its nodes hold);
* ``cel``        the CEL expressions of a contract, one validation per missing piece;
* ``manifests``  the policy and binding objects, labelled and annotated as Tessera's own;
* ``overlap``    two policies guarding one resource and asking for different pieces
                 (a conflict on both: neither contract enforced);
* ``changes``    desired against observed: create, update, delete, or a name Tessera does
                 not own (a conflict, never overwritten).
"""

from tessera.domain.admission.cel import summary
from tessera.domain.admission.changes import (
    Changes,
    ContractChange,
    conflict_message,
    diff,
    owned,
    with_conflicts,
)
from tessera.domain.admission.contract import Contract, contract_of, hami_common_word
from tessera.domain.admission.manifests import (
    API,
    BINDINGS,
    DECLARED_BY,
    POLICIES,
    binding,
    name_of,
    policy,
)
from tessera.domain.admission.overlap import Overlap, overlap_message, overlaps, with_overlaps
from tessera.domain.admission.scheduler_name import names as scheduler_names

__all__ = [
    "API",
    "BINDINGS",
    "DECLARED_BY",
    "POLICIES",
    "Changes",
    "Contract",
    "ContractChange",
    "Overlap",
    "binding",
    "conflict_message",
    "contract_of",
    "diff",
    "hami_common_word",
    "name_of",
    "overlap_message",
    "overlaps",
    "owned",
    "policy",
    "scheduler_names",
    "summary",
    "with_conflicts",
    "with_overlaps",
]
