"""The Alibaba GPU trace (2023, "openb") mapped onto H100 80GB MIG profiles (issue 29).

``num_gpu == 1`` and ``gpu_milli < 1000``: the smallest of 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb,
7g.80gb whose compute share (1, 2, 3, 4 or 7 sevenths) is at least ``gpu_milli / 1000``;
otherwise ``num_gpu`` whole GPUs (7g.80gb each, on one node); CPU-only pods are dropped.
Source: ../shared/data/alibaba-gpu-trace-2023 (Weng et al., "Beware of Fragmentation",
USENIX ATC'23).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared/data/alibaba-gpu-trace-2023"
PODS = "openb_pod_list_default.csv"
WHOLE = "7g.80gb"
# (profile, compute sevenths), smallest first
PROFILES = (("1g.10gb", 1), ("2g.20gb", 2), ("3g.40gb", 3), ("4g.40gb", 4), (WHOLE, 7))


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    profile: str
    count: int  # instances of ``profile`` on one node (whole GPUs: num_gpu)
    created: float  # seconds from the trace's start
    deleted: float

    @property
    def sevenths(self) -> int:
        """What the pod occupies, in sevenths of a GPU (exact: sums of them do not drift)."""
        return self.count * dict(PROFILES)[self.profile]

    @property
    def gpus(self) -> float:
        """What the pod occupies, in GPUs (a 1g.10gb is a seventh)."""
        return self.sevenths / 7


def profile_for(milli: int) -> str:
    for name, sevenths in PROFILES:
        if sevenths * 1000 >= milli * 7:
            return name
    return WHOLE


def load(data: Path = DATA) -> list[Pod]:
    """The GPU pods in trace order (by creation time, then name)."""
    out = []
    with (data / PODS).open(newline="") as f:
        for row in csv.DictReader(f):
            num, milli = int(row["num_gpu"]), int(row["gpu_milli"])
            if num == 0:
                continue
            if num == 1 and milli < 1000:
                profile, count = profile_for(milli), 1
            else:
                profile, count = WHOLE, num
            created = float(row["creation_time"])
            deleted = float(row["deletion_time"] or created)
            out.append(Pod(row["name"], profile, count, created, max(created, deleted)))
    out.sort(key=lambda p: (p.created, p.name))
    return out
