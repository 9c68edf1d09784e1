"""The operator's ClusterRole grants each verb once: no rule repeats another's grant."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _roles(path: Path) -> list[dict[str, Any]]:
    docs = yaml.safe_load_all(path.read_text())
    return [d for d in docs if d and d.get("kind") == "ClusterRole"]


def _grants(role: dict[str, Any]) -> Counter[tuple[str, str, str, str]]:
    found: Counter[tuple[str, str, str, str]] = Counter()
    for rule in role.get("rules") or []:
        names = ",".join(rule.get("resourceNames") or [])
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    found[(group, resource, names, verb)] += 1
    return found


@pytest.mark.parametrize("path", ["config/rbac/role.yaml", "deploy/tessera.yaml"])
def test_no_grant_is_listed_twice(path: str) -> None:
    roles = _roles(ROOT / path)
    assert roles
    for role in roles:
        twice = sorted(g for g, n in _grants(role).items() if n > 1)
        assert not twice, f"{role['metadata']['name']}: listed more than once: {twice}"
