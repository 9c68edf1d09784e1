"""The operator at cluster size: 10,000 KWOK nodes and 50,000 pods at ``TESSERA_BENCH_SCALE=1``.

One control plane with real scheduling, one ``tessera run`` process, measured side by side:

0. the cluster: KWOK nodes with 8 H100s each, then Deployments of 100 replicas of a one-GPU
   pod spread over 50 namespaces, placed by kube-scheduler and run by KWOK (timed: setup);
1. the raw write floor: one label patch per node sent one after another by a plain
   client (the operator also writes one request at a time);
   then every node carries the GPU node agent's record of which pod holds which GPU
   (``tessera.io/gpu-holders``, written once as the agent would: it writes only on change);
2. a SharingPolicy created over the same nodes (TimeSlicing: a label on each node, no
   disruption), timed from the create until the API server has streamed the label on every
   node; writes counted from the node watch;
3. the converged cluster left alone for 2 minutes (two resync periods): writes on every
   watched resource, pods included, and the operator's CPU seconds;
4. the operator's resident memory (peak) once it has listed and watched all of it.

"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

from bench import _workloads
from bench._harness import (
    SCALE,
    Operator,
    Row,
    WriteMeter,
    control_plane,
    create_nodes,
    node_path,
    parallel,
    scaled,
    table,
    wait_until,
)
from devcluster import fleet
from tessera.adapters.kube import Kube
from tessera.api import constants as c
from tessera.domain.rollout import holders

GPU = {"nvidia.com/gpu": "1"}

NODES = scaled(10_000)
REPLICAS = 100  # per Deployment
DEPLOYMENTS = max(1, round(scaled(50_000) / REPLICAS))
PODS = DEPLOYMENTS * REPLICAS
NAMESPACES = min(50, DEPLOYMENTS)
IDLE_SECONDS = 120
SP = "/apis/tessera.io/v1alpha1/sharingpolicies"
WATCHED = (
    "/api/v1/nodes",
    "/api/v1/configmaps",
    "/api/v1/events",
    SP,
    "/apis/tessera.io/v1alpha1/nodepoolgeometries",
    "/apis/tessera.io/v1alpha1/tenantquotas",
    "/api/v1/pods",
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


def say(text: str) -> None:
    """Progress on stderr as each phase ends: a run at full size takes the better part of an
    hour here, and one cut short still tells how far it got."""
    print(f"[bench.scale {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def quiet(meter: WriteMeter, operator: Operator, seconds: float = 5.0) -> None:
    """Wait until neither the API server nor the operator's CPU has moved for ``seconds``."""
    while True:
        writes, cpu = meter.total, operator.cpu_seconds()
        time.sleep(seconds)
        if meter.total == writes and operator.cpu_seconds() - cpu < 0.05 * seconds:
            return


def idle(
    meter: WriteMeter, operator: Operator
) -> tuple[float, dict[str, int], dict[tuple[str, str], int]]:
    """The converged cluster left alone: the operator's CPU seconds, the writes by resource
    and by writer."""
    meter.reset()
    cpu0 = operator.cpu_seconds()
    time.sleep(IDLE_SECONDS)  # the measured window itself
    cpu = operator.cpu_seconds() - cpu0
    say(f"idle {IDLE_SECONDS} s: operator CPU {cpu:.2f} s")
    return cpu, meter.per_resource(), dict(meter.by_writer)


def workloads(kube: Kube) -> float:
    """The Deployments, spread over the namespaces; the seconds until every replica is Ready."""
    spaces = [f"bench-{i}" for i in range(NAMESPACES)]
    _workloads.namespaces(kube, spaces)
    start = time.monotonic()
    _workloads.create(
        kube,
        [
            (spaces[i % NAMESPACES], _workloads.deployment(f"serve-{i}", REPLICAS, GPU))
            for i in range(DEPLOYMENTS)
        ],
    )
    _workloads.all_ready(kube, 3600)
    return time.monotonic() - start


def records(kube: Kube) -> int:
    """The GPU agent's record on every node, from the pods kube-scheduler bound there (one
    GPU each, numbered in bind order): what ``tessera agent gpus`` would publish. Returns the
    largest record's size in bytes."""
    held: dict[str, dict[str, list[int]]] = {}
    for pod in kube.list("/api/v1/pods"):
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            mine = held.setdefault(node, {})
            meta = pod["metadata"]
            mine[f"{meta['namespace']}/{meta['name']}"] = [len(mine) % 8]
    read = datetime.now(UTC)
    encoded = {n: holders.encode(holders.bounded(read, pods, ())) for n, pods in held.items()}

    def write(kube: Kube, node: str) -> None:
        patch = {"metadata": {"annotations": {c.GPU_HOLDERS_ANNOTATION: encoded[node]}}}
        kube.patch(node_path(node), patch)

    parallel(kube, write, sorted(encoded))
    return max((len(v) for v in encoded.values()), default=0)


def cluster(kube: Kube) -> tuple[float, float]:
    """The nodes, then the workloads: the seconds until each was Ready."""
    nodes_s = create_nodes(kube, fleet.pool("scale", "H100-80GB", NODES), timeout=3600)
    say(f"{NODES:,} KWOK nodes Ready in {nodes_s:.0f} s")
    pods_s = workloads(kube)
    say(f"{PODS:,} pods Ready in {pods_s:.0f} s")
    largest = records(kube)
    say(f"GPU holders record on every node (largest {largest} bytes)")
    return nodes_s, pods_s


def main() -> None:
    rows: list[Row] = []
    with control_plane() as (plane, kube):
        names = [f"scale-{i}" for i in range(NODES)]
        nodes_s, pods_s = cluster(kube)
        operator = Operator(plane).start()
        say(f"operator started, its log: {operator.log}")
        try:
            with WriteMeter(kube, WATCHED) as meter:
                kube.create(SP, policy("warm-up", "nothing"))  # the operator is up and watching
                wait_until(
                    lambda: "sharingpolicy/warm-up: pass done" in operator.text(), 120, "warm-up"
                )
                quiet(meter, operator)

                meter.reset()
                floor_s = raw_floor(str(plane.kubeconfig), names)
                say(f"raw floor: {NODES:,} patches in {floor_s:.1f} s")
                wait_until(
                    lambda: meter.per_resource().get("/api/v1/nodes", 0) >= NODES, 600, "floor"
                )
                quiet(meter, operator)

                labelled: set[str] = set()

                def saw(path: str, kind: str, obj: dict[str, Any]) -> None:
                    labels = obj["metadata"].get("labels") or {}
                    if path == "/api/v1/nodes" and labels.get(c.DEVICE_PLUGIN_CONFIG_LABEL):
                        labelled.add(obj["metadata"]["name"])

                meter.on_event = saw
                meter.reset()
                start = time.monotonic()
                kube.create(SP, policy("scale", "scale"))
                wait_until(lambda: len(labelled) >= NODES, 1800, "labels on every node")
                converge_s = time.monotonic() - start
                say(f"label change converged in {converge_s:.1f} s")
                quiet(meter, operator)
                node_writes = meter.per_resource().get("/api/v1/nodes", 0)
                change_writes = meter.total

                idle_cpu, idle_writes, idle_writers = idle(meter, operator)

            kube.patch(f"{SP}/scale", {"metadata": {"annotations": {"bench.tessera.io/poke": "1"}}})
            with WriteMeter(kube, ("/api/v1/nodes",)) as settle:
                quiet(settle, operator)
            rss, peak = operator.memory_mib()
            problems = operator.problems()
        finally:
            operator.stop()

    per_node = node_writes / NODES
    converge_ratio = converge_s / floor_s
    rows += [
        Row("label change, node writes per node", f"{per_node:.3f}", "1", f"{per_node:.3f}",
            "<= 1.05", per_node <= 1.05),
        Row("label change, all writes (nodes, ConfigMap, status, events)", str(change_writes),
            f"{NODES}", f"{change_writes / NODES:.3f}", "", None),
        Row("label change, seconds to converge", f"{converge_s:.2f}", f"{floor_s:.2f} (raw patches)",
            f"{converge_ratio:.2f}", "<= 1.2", converge_ratio <= 1.2),
        Row(f"idle {IDLE_SECONDS} s, writes", str(sum(idle_writes.values())), "0", "",
            "= 0", sum(idle_writes.values()) == 0),
        Row(f"idle {IDLE_SECONDS} s, operator CPU seconds", f"{idle_cpu:.2f}", "0",
            f"{100 * idle_cpu / IDLE_SECONDS:.2f} % of a core", "<= 1 %",
            idle_cpu / IDLE_SECONDS <= 0.01),
        Row(f"RSS, {NODES:,} nodes + {PODS:,} pods (MiB)", f"{rss:.0f} (peak {peak:.0f})",
            "", "", "<= 400", peak <= 400),
    ]  # fmt: skip
    print(
        f"{NODES:,} KWOK nodes x 8 H100 (Ready in {nodes_s:.0f} s), {PODS:,} pods of "
        f"{DEPLOYMENTS:,} Deployments placed by kube-scheduler (Ready in {pods_s:.0f} s); "
        f"scale {SCALE:g}; operator defaults (resync 60 s); "
        f"tracebacks or refused calls: {problems}"
    )
    if any(idle_writes.values()):
        print(f"idle writes by resource and writer: {idle_writers}")
    print(table(rows))


if __name__ == "__main__":
    main()
