"""The operator at cluster size: a label-only change over 1,000 nodes, idle cost, memory.

One control plane, one ``tessera run`` process, measured side by side:

1. the raw write floor: 1,000 node label patches sent one after another by a
   plain client (the operator also writes one request at a time);
2. a SharingPolicy created over the same 1,000 nodes (TimeSlicing: a label on
   each node, no disruption), timed from the create until the API server has
   streamed the label on every node; writes counted from the node watch;
3. the converged cluster left alone for 2 minutes (two resync periods):
   writes on every watched resource and the operator's CPU seconds;
4. 1,000 more nodes and 20,000 pods: the operator's resident memory once it
   has listed and watched them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from devcluster import fleet
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from ._harness import (
    Operator,
    Row,
    WriteMeter,
    control_plane,
    create_nodes,
    parallel,
    table,
    wait_until,
)

NODES = 1_000
MORE_NODES = 1_000
PODS = 20_000
NAMESPACES = 20
IDLE_SECONDS = 120
SP = "/apis/tessera.io/v1alpha1/sharingpolicies"
WATCHED = (
    "/api/v1/nodes",
    "/api/v1/configmaps",
    "/api/v1/events",
    SP,
    "/apis/tessera.io/v1alpha1/nodepoolgeometries",
    "/apis/tessera.io/v1alpha1/tenantquotas",
)


def policy(name: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "tessera.io/v1alpha1",
        "kind": "SharingPolicy",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}},
            "backend": "TimeSlicing",
            "timeSlicing": {"replicas": 4},
        },
    }


FLOOR_CLIENT = """
import sys, time
from tessera.adapters.kube import Kube, path_of
kube = Kube.from_kubeconfig(sys.argv[1])
names = sys.argv[2:]
start = time.monotonic()
for name in names:
    kube.patch(path_of("v1", "nodes", name), {"metadata": {"labels": {"bench.tessera.io/floor": "1"}}})
print(time.monotonic() - start)
"""


def raw_floor(kubeconfig: str, names: list[str]) -> float:
    """The same number of label patches from a plain client in its own process (as the
    operator is), one request at a time (as the operator sends them)."""
    out = subprocess.run(
        [sys.executable, "-c", FLOOR_CLIENT, kubeconfig, *names],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def quiet(meter: WriteMeter, operator: Operator, seconds: float = 5.0) -> None:
    """Wait until neither the API server nor the operator's CPU has moved for ``seconds``."""
    while True:
        writes, cpu = meter.total, operator.cpu_seconds()
        time.sleep(seconds)
        if meter.total == writes and operator.cpu_seconds() - cpu < 0.05 * seconds:
            return


def pods(kube: Kube, nodes: list[str]) -> None:
    namespaces = [f"bench-{i}" for i in range(NAMESPACES)]
    for ns in namespaces:
        kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
    for ns in namespaces:
        wait_until(
            lambda ns=ns: (
                kube.get_or_none(path_of("v1", "serviceaccounts", "default", ns)) is not None
            ),
            60,
            f"default ServiceAccount in {ns}",
        )

    def create(client: Kube, i: int) -> None:
        ns = namespaces[i % NAMESPACES]
        body = {
            "metadata": {"name": f"job-{i}", "labels": {"app": "bench"}},
            "spec": {
                "nodeName": nodes[i % len(nodes)],
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": "main",
                        "image": "cuda",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
        }
        client.create(path_of("v1", "pods", namespace=ns), body)

    parallel(kube, create, range(PODS))


def main() -> None:
    rows: list[Row] = []
    with control_plane() as (plane, kube):
        names = [f"scale-{i}" for i in range(NODES)]
        create_nodes(kube, fleet.pool("scale", "H100-80GB", NODES))
        operator = Operator(plane).start()
        try:
            with WriteMeter(kube, WATCHED) as meter:
                kube.create(SP, policy("warm-up", "nothing"))  # the operator is up and watching
                wait_until(
                    lambda: "sharingpolicy/warm-up: pass done" in operator.text(), 120, "warm-up"
                )
                quiet(meter, operator)

                meter.reset()
                floor_s = raw_floor(str(plane.kubeconfig), names)
                wait_until(
                    lambda: meter.per_resource().get("/api/v1/nodes", 0) >= NODES, 60, "floor"
                )
                quiet(meter, operator)

                labelled: set[str] = set()

                def saw(path: str, obj: dict[str, Any]) -> None:
                    labels = obj["metadata"].get("labels") or {}
                    if path == "/api/v1/nodes" and labels.get(c.DEVICE_PLUGIN_CONFIG_LABEL):
                        labelled.add(obj["metadata"]["name"])

                meter.on_event = saw
                meter.reset()
                start = time.monotonic()
                kube.create(SP, policy("scale", "scale"))
                converge_s = wait_until(lambda: len(labelled) >= NODES, 300, "labels on every node")
                converge_s = time.monotonic() - start
                quiet(meter, operator)
                node_writes = meter.per_resource().get("/api/v1/nodes", 0)
                change_writes = meter.total

                meter.reset()
                cpu0 = operator.cpu_seconds()
                time.sleep(IDLE_SECONDS)  # the measured window itself
                idle_cpu = operator.cpu_seconds() - cpu0
                idle_writes = meter.per_resource()

            more = fleet.pool("extra", "H100-80GB", MORE_NODES)
            create_nodes(kube, more)
            pods(kube, names + [s.name for s in more])
            kube.patch(f"{SP}/scale", {"metadata": {"annotations": {"bench.tessera.io/poke": "1"}}})
            with WriteMeter(kube, ("/api/v1/nodes",)) as settle:
                quiet(settle, operator)
            rss, peak = operator.memory_mib()
            problems = operator.problems()
        finally:
            operator.stop()

    per_node = node_writes / NODES
    rows += [
        Row("label change, node writes per node", f"{per_node:.3f}", "1", f"{per_node:.3f}",
            "<= 1.05", per_node <= 1.05),
        Row("label change, all writes (nodes, ConfigMap, status, events)", str(change_writes),
            f"{NODES}", f"{change_writes / NODES:.3f}", "", None),
        Row("label change, seconds to converge", f"{converge_s:.2f}", f"{floor_s:.2f} (raw patches)",
            f"{converge_s / floor_s:.2f}", "<= 2.0", converge_s / floor_s <= 2.0),
        Row(f"idle {IDLE_SECONDS} s, writes", str(sum(idle_writes.values())), "0", "",
            "= 0", sum(idle_writes.values()) == 0),
        Row(f"idle {IDLE_SECONDS} s, operator CPU seconds", f"{idle_cpu:.2f}", "0",
            f"{100 * idle_cpu / IDLE_SECONDS:.2f} % of a core", "<= 1 %",
            idle_cpu / IDLE_SECONDS <= 0.01),
        Row(f"RSS, {NODES + MORE_NODES:,} nodes + {PODS:,} pods (MiB)", f"{rss:.0f} (peak {peak:.0f})",
            "", "", "<= 300", peak <= 300),
    ]  # fmt: skip
    print(
        f"{NODES:,} simulated 8-GPU nodes; operator defaults (resync 60 s); tracebacks or refused calls: {problems}"
    )
    if any(idle_writes.values()):
        print(f"idle writes by resource: {idle_writes}")
    print(table(rows))


if __name__ == "__main__":
    main()
