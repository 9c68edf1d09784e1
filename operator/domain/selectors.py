"""metav1.LabelSelector matching, the way the API server reads it.

Pure and tiny on purpose: SharingPolicy, NodePoolGeometry and TenantQuota all
decide "which objects does this select" with it, and they must agree with
``kubectl get -l``. The rules that surprise people are kept here once:

* an empty selector (no labels, no expressions) selects everything;
* a missing selector (``None``) selects nothing;
* ``NotIn`` holds for objects that do not carry the key at all.
"""

from __future__ import annotations

from collections.abc import Mapping

from tessera.api.v1alpha1.common import LabelSelector, LabelSelectorRequirement


def matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether an object carrying ``labels`` is selected by ``selector``."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in selector.match_labels.items()):
        return False
    return all(requirement_holds(r, labels) for r in selector.match_expressions)


def requirement_holds(requirement: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One ``matchExpressions`` entry against ``labels``."""
    present = requirement.key in labels
    if requirement.operator == "Exists":
        return present
    if requirement.operator == "DoesNotExist":
        return not present
    inside = present and labels[requirement.key] in requirement.values
    return inside if requirement.operator == "In" else not inside


def describe(selector: LabelSelector | None) -> str:
    """The selector in ``kubectl -l`` syntax, for messages a person reads."""
    if selector is None:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for r in selector.match_expressions:
        if r.operator == "Exists":
            parts.append(r.key)
        elif r.operator == "DoesNotExist":
            parts.append(f"!{r.key}")
        else:
            op = "in" if r.operator == "In" else "notin"
            parts.append(f"{r.key} {op} ({','.join(r.values)})")
    return ",".join(parts) or "<everything>"
