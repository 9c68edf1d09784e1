"""The stand-in HAMi and Volcano installs' config texts (devcluster.schedulers writes them).

Tests that need the same text import it from here rather than write it again.
"""

from __future__ import annotations

# The chart's device-config.yaml, v2.10 shape (hami_ascend.md §1.6), trimmed to one MIG model.
_HAMI_NVIDIA_CONFIG = """\
nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  preConfiguredDeviceMemory: 0
  memoryFactor: 1
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  enableNumaTopology: false
  gpuCorePolicy: default
  libCudaLogLevel: 1
  runtimeClassName: ""
  migProfileAllowlist:
  - models: [ "A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB" ]
    profiles: [ "1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb" ]
"""
# Its vnpus section alone: the 310P3 entry HAMi v2.10 ships.
HAMI_VNPUS_CONFIG = """\
vnpus:
  hamiVnpuCore: false
  configs:
  - chipName: 310P3
    commonWord: Ascend310P
    resourceName: huawei.com/Ascend310P
    resourceMemoryName: huawei.com/Ascend310P-memory
    resourceCoreName: huawei.com/Ascend310P-core
    memoryAllocatable: 21527
    memoryCapacity: 24576
    memoryFactor: 1
    aiCore: 8
    aiCPU: 7
    runtimeClassName: ""
    overwriteEnv: false
    templates:
      - {name: vir01, memory: 3072,  aiCore: 1, aiCPU: 1}
      - {name: vir02, memory: 6144,  aiCore: 2, aiCPU: 2}
      - {name: vir04, memory: 12288, aiCore: 4, aiCPU: 4}
"""
HAMI_DEVICE_CONFIG = _HAMI_NVIDIA_CONFIG + HAMI_VNPUS_CONFIG

# In the style of the Volcano chart's default scheduler conf: no deviceshare plugin yet.
VOLCANO_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
