"""HAMi's scheduler name as its Deployment says it (``--scheduler-name``), else the chart's."""

from __future__ import annotations

from typing import Any

import pytest

from tessera.domain.admission import scheduler_name


def deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": list(containers)}}}}


KUBE_SCHEDULER = {"name": "kube-scheduler", "command": ["kube-scheduler", "--config=/c.yaml"]}


@pytest.mark.parametrize(
    ("found", "name"),
    [
        pytest.param(None, "hami-scheduler", id="no-deployment"),
        pytest.param(deployment(KUBE_SCHEDULER), "hami-scheduler", id="no-flag"),
        pytest.param(
            deployment(
                KUBE_SCHEDULER,
                {"name": "ext", "command": ["scheduler", "--scheduler-name=gpu-sched", "--x=1"]},
            ),
            "gpu-sched",
            id="extender-command",
        ),
        pytest.param(
            deployment(
                {"name": "ext", "command": ["scheduler"], "args": ["--scheduler-name", "s2"]}
            ),
            "s2",
            id="separate-word-in-args",
        ),
        pytest.param(
            deployment({"name": "ext", "command": ["scheduler", "--scheduler-name="]}),
            "hami-scheduler",
            id="empty-value",
        ),
        pytest.param(
            deployment({"name": "ext", "command": ["scheduler", "--scheduler-name-x=y"]}),
            "hami-scheduler",
            id="another-flag",
        ),
    ],
)
def test_hami_scheduler_name(found: dict[str, Any] | None, name: str) -> None:
    assert scheduler_name.hami(found) == name
    assert scheduler_name.names(found) == {"HAMi": name, "Volcano": "volcano"}
