"""Tessera's recount of what the quota system charges, table-tested against the 1.34 evaluators."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from quota_builders import GPU, MIG

from tessera.domain.quota import charged

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
GPUS = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIGS = "mig-1g.nvidia.com.deviceclass.resource.k8s.io/devices"


def ctr(**requests: int | str) -> dict[str, Any]:
    return {
        "name": "c",
        "resources": {"requests": {k.replace("_", "/"): v for k, v in requests.items()}},
    }


def pod(
    *containers: dict[str, Any],
    init: tuple[dict[str, Any], ...] = (),
    ns: str = "a",
    phase: str = "Pending",
    **extra: Any,
) -> dict[str, Any]:
    meta = {"name": "p", "namespace": ns, **extra.pop("meta", {})}
    spec = {"containers": list(containers), "initContainers": list(init), **extra}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def sidecar(**requests: int) -> dict[str, Any]:
    return {**ctr(**requests), "restartPolicy": "Always"}


M = "nvidia.com_mig-1g.10gb"  # ctr() keyword for MIG
G = "nvidia.com_gpu"


@pytest.mark.parametrize(
    ("case", "pods", "want"),
    [
        ("one container", [pod(ctr(**{M: 1}))], {MIG: 1, GPU: 0}),
        ("containers add up", [pod(ctr(**{M: 1}), ctr(**{M: 2, G: 1}))], {MIG: 3, GPU: 1}),
        ("pods add up", [pod(ctr(**{M: 1})), pod(ctr(**{M: "2"}))], {MIG: 3, GPU: 0}),
        (
            "a bigger init container wins",
            [pod(ctr(**{M: 1}), init=(ctr(**{M: 3}),))],
            {MIG: 3, GPU: 0},
        ),
        (
            "a smaller init container adds nothing",
            [pod(ctr(**{M: 2}), init=(ctr(**{M: 1}),))],
            {MIG: 2, GPU: 0},
        ),
        (
            "sidecars add to the containers",
            [pod(ctr(**{M: 1}), init=(sidecar(**{M: 1}),))],
            {MIG: 2, GPU: 0},
        ),
        (
            "an init container runs beside the sidecars started before it",
            [pod(ctr(**{M: 1}), init=(sidecar(**{M: 1}), ctr(**{M: 2})))],
            {MIG: 3, GPU: 0},
        ),
        ("overhead is charged", [pod(ctr(**{M: 1}), overhead={MIG: "1"})], {MIG: 2, GPU: 0}),
        ("succeeded pods are not charged", [pod(ctr(**{M: 1}), phase="Succeeded")], {}),
        ("failed pods are not charged", [pod(ctr(**{M: 1}), phase="Failed")], {}),
        (
            "a pod within its deletion grace is still charged",
            [
                pod(
                    ctr(**{M: 1}),
                    meta={
                        "deletionTimestamp": "2026-01-01T11:59:50Z",
                        "deletionGracePeriodSeconds": 30,
                    },
                )
            ],
            {MIG: 1, GPU: 0},
        ),
        (
            "a pod past its deletion grace is not",
            [
                pod(
                    ctr(**{M: 1}),
                    meta={
                        "deletionTimestamp": "2026-01-01T11:59:00Z",
                        "deletionGracePeriodSeconds": 30,
                    },
                )
            ],
            {},
        ),
        (
            "cpu and memory are not Tessera's",
            [pod(ctr(cpu="500m", memory="1Gi"))],
            {MIG: 0, GPU: 0},
        ),
    ],
)
def test_pod_requests_are_counted_as_the_pod_evaluator_does(
    case: str, pods: list[dict[str, Any]], want: dict[str, int]
) -> None:
    got = charged.pods([MIG, GPU, GPUS], pods, NOW)
    assert got == ({"a": want} if want else {}), case


def test_pods_are_counted_per_namespace_and_only_for_extended_resources() -> None:
    pods = [pod(ctr(**{M: 1}), ns="a"), pod(ctr(**{M: 2}), ns="b")]
    assert charged.pods([MIG], pods, NOW) == {"a": {MIG: 1}, "b": {MIG: 2}}
    assert charged.pods([GPUS, charged.CLAIMS], pods, NOW) == {}


def claim(*requests: dict[str, Any], ns: str = "a") -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": ns},
        "spec": {"devices": {"requests": list(requests)}},
    }


def exactly(cls: str, mode: str = "ExactCount", count: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if count is not None:
        body["count"] = count
    return body


@pytest.mark.parametrize(
    ("case", "claims", "want"),
    [
        ("a claim with no request is one claim", [claim()], {charged.CLAIMS: 1, GPUS: 0, MIGS: 0}),
        (
            "ExactCount charges its count",
            [claim({"exactly": exactly("gpu.nvidia.com", count=2)})],
            {charged.CLAIMS: 1, GPUS: 2, MIGS: 0},
        ),
        (
            "count defaults to 1",
            [claim({"exactly": exactly("gpu.nvidia.com")})],
            {charged.CLAIMS: 1, GPUS: 1, MIGS: 0},
        ),
        (
            "All charges 32",
            [claim({"exactly": exactly("gpu.nvidia.com", "All")})],
            {charged.CLAIMS: 1, GPUS: 32, MIGS: 0},
        ),
        (
            "an unknown mode charges nothing",
            [claim({"exactly": exactly("gpu.nvidia.com", "Later")})],
            {charged.CLAIMS: 1, GPUS: 0, MIGS: 0},
        ),
        (
            "firstAvailable charges each class its largest subrequest",
            [
                claim(
                    {
                        "firstAvailable": [
                            exactly("mig-1g.nvidia.com", count=2),
                            exactly("gpu.nvidia.com"),
                            exactly("mig-1g.nvidia.com", count=3),
                        ]
                    }
                )
            ],
            {charged.CLAIMS: 1, GPUS: 1, MIGS: 3},
        ),
        (
            "requests and claims add up",
            [
                claim(
                    {"exactly": exactly("gpu.nvidia.com")},
                    {"exactly": exactly("gpu.nvidia.com", count=2)},
                ),
                claim(),
            ],
            {charged.CLAIMS: 2, GPUS: 3, MIGS: 0},
        ),
    ],
)
def test_claims_are_counted_as_the_claim_evaluator_does(
    case: str, claims: list[dict[str, Any]], want: dict[str, int]
) -> None:
    assert charged.claims([charged.CLAIMS, GPUS, MIGS, MIG], claims) == {"a": want}, case


def test_nothing_is_recounted_for_resources_that_need_no_recount() -> None:
    assert (
        charged.from_pods([GPUS, charged.CLAIMS, "count/resourceclaimtemplates.resource.k8s.io"])
        == set()
    )
    assert charged.from_claims([MIG, "count/resourceclaimtemplates.resource.k8s.io"]) == set()
    assert charged.claims([MIG], [claim()]) == {}


def test_merged_joins_pod_and_claim_counts_per_namespace() -> None:
    assert charged.merged({"a": {MIG: 1}}, {"a": {GPUS: 2}, "b": {GPUS: 1}}) == {
        "a": {MIG: 1, GPUS: 2},
        "b": {GPUS: 1},
    }
