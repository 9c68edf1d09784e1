"""A MIG rollout of 1,000 KWOK nodes with maxUnavailable 10 % against the ideal waves.

Each simulated MIG manager takes a fixed ``RECONFIGURE_S`` to repartition its
node, so no rollout can beat ceil(1,000 / 100) x RECONFIGURE_S: a hundred nodes at a
time, each busy for exactly that long. What the operator adds on top (noticing
a finished node, cordoning the next one, writing labels and state, verifying,
uncordoning) is the overhead this measures. The pool starts unpartitioned, so
every node goes through the whole machine: cordon, drain, apply, verify,
uncordon. The watch also records the most nodes cordoned at any instant.
"""

from __future__ import annotations

import math
import time
from typing import Any

from bench._harness import Operator, Row, WriteMeter, control_plane, create_nodes, table, wait_until
from devcluster import fleet, gpunode
from tessera.api import constants as c

NODES = 1_000
PERCENT = 10
MAX_UNAVAILABLE = max(1, NODES * PERCENT // 100)  # a percentage rounds down, never below 1
RECONFIGURE_S = 20.0
NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"


def pool(name: str, selector: str, max_unavailable: int | str) -> dict[str, Any]:
    return {
        "apiVersion": "tessera.io/v1alpha1",
        "kind": "NodePoolGeometry",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: selector}},
            "mig": {"layouts": [{"profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]},
            "rollout": {"maxUnavailable": max_unavailable},
        },
    }


def observed(obj: dict[str, Any]) -> bool:
    """The operator has written its status for this generation (whatever it says)."""
    return (obj.get("status") or {}).get("observedGeneration") == obj["metadata"]["generation"]


def ready(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    conds = {x["type"]: x["status"] for x in status.get("conditions") or []}
    return (
        conds.get("Ready") == "True"
        and status.get("observedGeneration") == obj["metadata"]["generation"]
    )


def main() -> None:
    with control_plane() as (plane, kube):
        create_nodes(kube, fleet.pool("roll", "H100-80GB", NODES))
        agents = gpunode.GpuNodeAgents(kube, reconfigure_seconds=RECONFIGURE_S).start()
        operator = Operator(plane).start()
        cordoned: dict[str, bool] = {}
        worst = 0
        steps = Steps()

        def saw(path: str, kind: str, obj: dict[str, Any]) -> None:
            nonlocal worst
            if path == "/api/v1/nodes":
                cordoned[obj["metadata"]["name"]] = bool(obj["spec"].get("unschedulable"))
                worst = max(worst, sum(cordoned.values()))
                steps.saw(obj)

        try:
            with WriteMeter(kube, ("/api/v1/nodes",)) as meter:
                kube.create(NPG, pool("warm-up", "nothing", 1))  # on no node: Stalled/NoNodes
                wait_until(lambda: observed(kube.get(f"{NPG}/warm-up")), 120, "operator warm")
                meter.on_event = saw
                meter.reset()
                start = time.monotonic()
                kube.create(NPG, pool("roll", "roll", f"{PERCENT}%"))
                wait_until(lambda: ready(kube.get(f"{NPG}/roll")), 3600, "rollout Ready")
                took = time.monotonic() - start
                writes = meter.total
            updated = kube.get(f"{NPG}/roll")["status"]["nodes"]["updated"]
            problems = operator.problems()
        finally:
            operator.stop()
            agents.stop()

    waves = math.ceil(NODES / MAX_UNAVAILABLE)
    ideal = waves * RECONFIGURE_S
    print(
        f"{NODES:,} KWOK H100 nodes, maxUnavailable {PERCENT}% ({MAX_UNAVAILABLE}), "
        f"simulated reconfiguration "
        f"{RECONFIGURE_S:.0f} s per node; {updated} updated; tracebacks or refused calls: {problems}"
    )
    rows = [
        Row("rollout, seconds", f"{took:.1f}", f"{ideal:.1f} ({waves} waves)",
            f"{took / ideal:.2f}", "<= 1.15", took / ideal <= 1.15),
        Row("most nodes cordoned at once", str(worst), str(MAX_UNAVAILABLE), "",
            f"<= {MAX_UNAVAILABLE}", worst <= MAX_UNAVAILABLE),
        Row("node writes per node (operator + agent)", f"{writes / NODES:.1f}", "", "", "", None),
        *steps.rows(RECONFIGURE_S),
    ]  # fmt: skip
    print(table(rows))


class Steps:
    """Each node's rollout as an outside watcher of Nodes sees it, step by step: when it was
    cordoned, handed its layout, reported the layout live, and released."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str], float] = {}

    def saw(self, node: dict[str, Any]) -> None:
        name, now = node["metadata"]["name"], time.monotonic()
        labels = node["metadata"].get("labels") or {}
        held = bool(node["spec"].get("unschedulable"))
        alloc = (node.get("status") or {}).get("allocatable") or {}
        live = labels.get(c.MIG_CONFIG_STATE_LABEL) == "success" and any(
            k.startswith("nvidia.com/mig-") and v != "0" for k, v in alloc.items()
        )
        for step, now_true in (
            ("cordoned", held),
            ("requested", labels.get(c.MIG_CONFIG_LABEL, "").startswith("tessera-roll-")),
            ("live", live and (name, "requested") in self.first),
            ("released", not held and (name, "live") in self.first),
        ):
            if now_true:
                self.first.setdefault((name, step), now)

    def rows(self, reconfigure: float) -> list[Row]:
        def median(a: str, b: str) -> float:
            spans = sorted(
                self.first[(n, b)] - self.first[(n, a)]
                for (n, step) in self.first
                if step == a and (n, b) in self.first
            )
            return spans[len(spans) // 2] if spans else float("nan")

        return [
            Row("…per node, cordon -> layout requested (operator), median s",
                f"{median('cordoned', 'requested'):.2f}", "0", "", "", None),
            Row("…layout requested -> live: state success + MIG devices (agent), median s",
                f"{median('requested', 'live'):.2f}", f"{reconfigure:.0f}", "", "", None),
            Row("…live -> uncordoned (operator), median s",
                f"{median('live', 'released'):.2f}", "0", "", "", None),
        ]  # fmt: skip


if __name__ == "__main__":
    main()
