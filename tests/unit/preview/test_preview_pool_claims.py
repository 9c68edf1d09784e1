"""Previews of pools that would share nodes (an error) and of pools that select no node."""

from __future__ import annotations

from preview_builders import T0, converged, gpu_nodes, world

from builders import LAYOUT_A, LAYOUT_B, GeometryWrapper
from tessera.domain import preview


def _pool(name: str, pool_label: str, layout: dict[str, object]) -> dict[str, object]:
    return GeometryWrapper(name).pool(pool_label).layout(layout).obj()


def test_a_pool_over_a_live_serving_pool_is_a_conflict_that_changes_nothing() -> None:
    live = _pool("inf", "inf", LAYOUT_A)
    nodes, cm = converged(gpu_nodes("inf", 2), live)
    typo = _pool("inf-2", "inf", LAYOUT_B)
    result = preview.preview(world(*nodes, cm, live), [typo], T0)
    [obj] = result.objects
    assert obj.changes == ()  # the live pool holds both nodes: the new one may touch neither
    assert result.conflicts == (
        "NodePoolGeometry/inf-2: Conflict: nodepoolgeometry/inf also selects nodes inf-0, inf-1, "
        "which nodepoolgeometry/inf already holds: this pool leaves them alone until a "
        "nodeSelector is narrowed",
    )
    assert "  ! Conflict: nodepoolgeometry/inf also selects nodes inf-0, inf-1" in (
        preview.render(result)
    )


def test_two_new_pools_on_the_same_nodes_conflict_both_ways() -> None:
    a, b = _pool("a", "shared", LAYOUT_A), _pool("b", "shared", LAYOUT_B)
    result = preview.preview(world(*gpu_nodes("shared", 3)), [a, b], T0)
    assert [o.changes for o in result.objects] == [(), ()]
    assert [c.split(": ", 2)[:2] for c in result.conflicts] == [
        ["NodePoolGeometry/a", "Conflict"],
        ["NodePoolGeometry/b", "Conflict"],
    ]
    assert (
        "nodepoolgeometry/b also selects nodes shared-0, shared-1, shared-2" in result.conflicts[0]
    )


def test_a_pool_on_no_node_says_so_without_failing_the_plan() -> None:
    pool = _pool("typo", "h100-inferenc", LAYOUT_A)
    result = preview.preview(world(*gpu_nodes("h100-inference", 1)), [pool], T0)
    [obj] = result.objects
    assert result.conflicts == ()
    assert obj.problems == (
        "NoNodes: spec.nodeSelector (tessera.io/pool=h100-inferenc) matches no node: no node "
        "runs this layout; label nodes or fix the selector",
    )


def test_the_pool_that_keeps_its_nodes_is_warned_but_not_failed() -> None:
    """The operator keeps that pool going (Ready) and stalls only the newcomer: the holder's
    own GitOps plan shows the conflict, and does not fail on a mistake in another pool."""
    live = _pool("inf", "inf", LAYOUT_A)
    nodes, cm = converged(gpu_nodes("inf", 2), live)
    typo = _pool("inf-2", "inf", LAYOUT_B)
    result = preview.preview(world(*nodes, cm, live, typo), [live], T0)
    [obj] = result.objects
    assert obj.problems == (
        "Conflict: nodepoolgeometry/inf-2 also selects nodes inf-0, inf-1; this pool already "
        "holds them and keeps them",
    )
    assert result.conflicts == () and not result.changed
