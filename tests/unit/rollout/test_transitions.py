"""The transition table: one pass per allowed edge takes it, and nothing else is allowed.

Each row is a node in one phase and what makes it leave; the pass is planned
with the phase checks watched, and the row's edge must be among those taken.
Together the rows cover ``state.TRANSITIONS`` exactly, so an edge the code
never takes cannot sit in the table (nor in docs/rollout.md) unnoticed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pytest
from persisted import not_one_write, planned
from phase_spy import EDGES, shown, watching
from rollout_builders import POOL, T0, desired, policy, secs, state
from rollout_builders import target as layout

from builders.views import NEW, OLD, gpu_pod, node, pdb
from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain.rollout.planning import plan
from tessera.domain.rollout.state import (
    Edge,
    IllegalTransition,
    Phase,
    StateError,
    check,
    decode,
    encode,
)
from tessera.domain.rollout.views import DesiredNode, NodeView, PdbView, PodView

C, D, B, A, V, U, F = Phase
THIRD = "tessera-third"
POD = gpu_pod("a", labels={"app": "s"})
INVALID = desired(invalid="3g.40gb x3 needs 9 slots")
HELD = {"cordoned": True, "tainted": True}
SETTLED = state(F, target=layout(OLD), rollback_of=NEW, rolled_back=True)


@dataclass
class Row:
    edge: Edge
    node: NodeView
    want: DesiredNode | None = field(default_factory=desired)
    pods: Sequence[PodView] = ()
    pdbs: Sequence[PdbView] = ()
    rollout: RolloutSpec = field(default_factory=RolloutSpec)
    now: datetime = T0


ROWS = {
    "admission starts a node": Row((None, C), node()),
    "cordon seen: the drain starts": Row((C, D), node(st=state(C), **HELD), pods=[POD]),
    "cordoned, the layout turns invalid: backed out": Row(
        (C, U), node(st=state(C), **HELD), INVALID
    ),
    "drained: the layout is asked for": Row((D, A), node(st=state(D), **HELD)),
    "a PDB still holds a pod after drain.timeout": Row(
        (D, B),
        node(st=state(D), **HELD),
        pods=[POD],
        pdbs=[pdb("serving", 0, app="s")],
        now=T0 + secs(31 * 60),
    ),
    "draining, the layout turns invalid: backed out": Row(
        (D, U), node(st=state(D), **HELD), INVALID, pods=[POD]
    ),
    "the PDB allows again: evictions resume": Row(
        (B, D), node(st=state(B), **HELD), pods=[POD], pdbs=[pdb("serving", 1, app="s")]
    ),
    "blocked, then the pod left: the layout is asked for": Row((B, A), node(st=state(B), **HELD)),
    "blocked, the layout turns invalid: backed out": Row(
        (B, U), node(st=state(B), **HELD), INVALID, pods=[POD]
    ),
    "the recount is empty: labels written": Row((A, V), node(st=state(A), **HELD)),
    "pods came back before the change: drain again": Row(
        (A, D), node(st=state(A), **HELD), pods=[POD]
    ),
    "applying, the layout turns invalid: backed out": Row(
        (A, U), node(st=state(A), **HELD), INVALID
    ),
    "verified: released": Row((V, U), node(st=state(V), config=NEW, **HELD)),
    "the agent failed": Row((V, F), node(st=state(V), config=NEW, agent="failed", **HELD)),
    "the spec moved on while verifying: retarget": Row(
        (V, A), node(st=state(V), config=NEW, agent="pending", **HELD), desired(THIRD)
    ),
    "labels never written and pods back: drain again": Row(
        (V, D), node(st=state(V), **HELD), pods=[POD]
    ),
    "Rollback re-applies the last good layout": Row(
        (F, A),
        node(st=state(F), config=NEW, agent="failed", **HELD),
        rollout=policy(onFailure="Rollback"),
    ),
    "a failed node left the pool: released": Row(
        (F, U), node(st=state(F), config=NEW, agent="failed", **HELD), None
    ),
    "a settled rollback, then a new layout: started afresh": Row(
        (F, C), node(st=SETTLED), desired(THIRD)
    ),
    "a settled rollback, the spec back on the layout it runs: record dropped": Row(
        (F, None), node(st=SETTLED), desired(OLD)
    ),
    "uncordoned: the record is cleared last": Row((U, None), node(st=state(U), config=NEW)),
    "a rollback uncordoned: its settled record is written": Row(
        (U, F), node(st=state(U, target=layout(OLD), rollback_of=NEW), **HELD)
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_each_edge_is_taken(row: Row) -> None:
    want = {} if row.want is None else {row.node.name: row.want}
    with watching() as seen:
        p = plan(POOL, row.rollout, want, [row.node], row.pods, row.pdbs, row.now)
    assert row.edge in seen, shown(seen)
    assert not not_one_write(planned([row.node], p.actions))  # what is written, not checked


def test_the_rows_cover_the_table_exactly() -> None:
    rows = [r.edge for r in ROWS.values()]
    assert len(rows) == len(set(rows))
    assert set(rows) == EDGES, shown(EDGES ^ set(rows))


@pytest.mark.parametrize(
    ("before", "after"),
    [(None, D), (C, V), (D, D), (V, V), (U, C), (A, None), (None, None)],
)
def test_an_edge_not_in_the_table_raises(before: Phase | None, after: Phase | None) -> None:
    with pytest.raises(IllegalTransition, match="may not be followed by"):
        check(before, after)


def test_a_step_outside_the_table_fails_where_the_state_changes() -> None:
    with pytest.raises(IllegalTransition, match="phase Cordoned may not be followed by Verifying"):
        state(C).to(V, T0)
    with pytest.raises(IllegalTransition, match=r"gpu-1: rollout phase Blocked .* by no record"):
        check(B, None, "gpu-1")


def test_the_values_written_to_nodes_never_change() -> None:
    # Old nodes carry these strings; report-only categories (Pending, Updated) are never written.
    assert [p.value for p in Phase] == [
        "Cordoned",
        "Draining",
        "Blocked",
        "Applying",
        "Verifying",
        "Uncordoning",
        "Failed",
    ]
    for p in Phase:
        assert decode(encode(state(p))) == state(p)
    for never in ("Pending", "Updated"):
        with pytest.raises(StateError, match="unknown phase"):
            decode(encode(state(C)).replace('"Cordoned"', f'"{never}"'))
