"""Label-selector matching and the one-policy-per-node rule."""

from __future__ import annotations

import pytest
from sharing_builders import gpu_node, policy

from tessera.api.v1alpha1.common import LabelSelector
from tessera.domain.base import selectors
from tessera.domain.sharing.assignment import assign

LABELS = {"zone": "a", "gpu": "h100"}


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        pytest.param({}, True, id="empty-selects-everything"),
        pytest.param({"matchLabels": {"zone": "a"}}, True, id="match-labels"),
        pytest.param({"matchLabels": {"zone": "b"}}, False, id="match-labels-differ"),
        pytest.param(
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
            True,
            id="in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]},
            False,
            id="notin",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["1"]}]},
            True,
            id="notin-absent-key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["1"]}]},
            False,
            id="in-absent-key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, True, id="exists"
        ),
        pytest.param(
            {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]},
            False,
            id="does-not-exist",
        ),
        pytest.param(
            {
                "matchLabels": {"zone": "a"},
                "matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}],
            },
            False,
            id="all-must-hold",
        ),
    ],
)
def test_selector_matching(selector: dict[str, object], want: bool) -> None:
    assert selectors.matches(LabelSelector.model_validate(selector), LABELS) is want


def test_missing_selector_selects_nothing() -> None:
    assert selectors.matches(None, LABELS) is False


def test_describe_reads_like_kubectl() -> None:
    sel = LabelSelector.model_validate(
        {
            "matchLabels": {"zone": "a"},
            "matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["x", "y"]}],
        }
    )
    assert selectors.describe(sel) == "zone=a,gpu notin (x,y)"


def test_higher_priority_wins() -> None:
    low, high = policy("low", priority=0), policy("high", priority=5)
    got = assign([low, high], [gpu_node("n1"), gpu_node("n2", pool="b")])
    assert dict(got.owner) == {"n1": "high"} and got.conflicts == ()


def test_equal_top_priority_is_a_conflict_naming_policies_and_nodes() -> None:
    a, b, low = policy("a", priority=3), policy("b", priority=3), policy("z", priority=1)
    got = assign([b, a, low], [gpu_node("n2"), gpu_node("n1")])
    assert dict(got.owner) == {} and got.held == {"n1", "n2"}
    [conflict] = got.conflicts
    assert conflict.policies == ("a", "b") and conflict.nodes == ("n1", "n2")
    assert conflict.message.startswith(
        "sharingpolicy/a and sharingpolicy/b both select nodes n1, n2 with priority 3"
    )
    assert got.conflicts_of("a") == got.conflicts_of("b") == (conflict,)
    assert got.conflicts_of("z") == ()


def test_tie_below_a_winner_is_no_conflict() -> None:
    got = assign([policy("a"), policy("b"), policy("c", priority=1)], [gpu_node("n1")])
    assert dict(got.owner) == {"n1": "c"} and got.conflicts == ()


@pytest.mark.parametrize(
    "text",
    ["app=x", "app=x,tier notin (db,cache)", "app in (a,b),!legacy,env", "k notin (a)"],
)
def test_kubectl_selector_syntax_reads_back_as_written(text: str) -> None:
    from tessera.domain.base.selectors import describe, parse

    assert describe(parse(text)) == text


def test_kubectl_selector_equality_forms_mean_what_kubectl_means() -> None:
    from tessera.domain.base.selectors import matches, parse

    assert matches(parse("app==x"), {"app": "x"}) and not matches(parse("app=x"), {})
    assert matches(parse("app!=x"), {}), "!= also selects objects without the key"
    assert not matches(parse("app!=x"), {"app": "x"})
    assert matches(parse(""), {"any": "thing"}), "an empty selector selects everything"
