"""The flags the dev cluster's scheduling options add to kube-controller-manager and
kube-scheduler: none with the defaults (what every test runs), the benches' when set."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster.scheduling import Scheduling, client_args, controller_manager_args

KWOK = Path("/nowhere/kwok")


@pytest.mark.parametrize(
    ("options", "scheduler", "controller_manager"),
    [
        # the defaults: the components' own defaults, no flag
        (Scheduling(KWOK), [], []),
        # unthrottled clients: kube-scheduler and kube-controller-manager alike
        (
            Scheduling(KWOK, api_qps=5000),
            ["--kube-api-qps=5000", "--kube-api-burst=10000"],
            ["--kube-api-qps=5000", "--kube-api-burst=10000"],
        ),
        # long Leases: a node goes Unknown only after the grace, at start-up too
        (
            Scheduling(KWOK, lease_seconds=1200, node_monitor_grace_seconds=1200),
            [],
            ["--node-monitor-grace-period=1200s", "--node-startup-grace-period=1200s"],
        ),
    ],
)
def test_flags(options: Scheduling, scheduler: list[str], controller_manager: list[str]) -> None:
    assert client_args(options) == scheduler
    assert controller_manager_args(options) == controller_manager
