"""Names Tessera shares with the cluster: API group, label and annotation keys.

Everything another component reads or writes (the GPU Operator, HAMi, the
device plugin, Tessera's own node agent) is spelled here once.
"""

GROUP = "tessera.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CATEGORY = "tessera"

# --- Tessera's own keys -------------------------------------------------------
FINALIZER = "tessera.io/finalizer"
POOL_LABEL = "tessera.io/pool"
APPROVE_PLAN_ANNOTATION = "tessera.io/approve-plan"
GEOMETRY_PENDING_TAINT = "tessera.io/geometry-pending"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "tessera"
TENANT_QUOTA_LABEL = "tessera.io/tenant-quota"
# Rollout state persisted on each Node (see tessera.domain.rollout).
NODE_PHASE_ANNOTATION = "tessera.io/rollout-phase"
NODE_STATE_ANNOTATION = "tessera.io/rollout-state"
# Who holds which GPU, published by the GPU node agent (tessera.domain.rollout.holders).
GPU_HOLDERS_ANNOTATION = "tessera.io/gpu-holders"
# Nodes of a pool still waiting for their turn: replacement pods prefer the others.
GEOMETRY_QUEUED_TAINT = "tessera.io/geometry-queued"
# The GPU node agent's pods (config/agent): a holder record counts only while one runs.
COMPONENT_LABEL = "app.kubernetes.io/component"
GPU_AGENT_COMPONENT = "gpu-agent"

# --- NVIDIA GPU Operator / GFD / device plugin -------------------------------
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"

# --- Ascend -------------------------------------------------------------------
NPU_PRODUCT_LABEL = "tessera.io/npu.product"
VNPU_CONFIG_LABEL = "tessera.io/vnpu.config"
VNPU_CONFIG_STATE_LABEL = "tessera.io/vnpu.config.state"
# vCANN-RT (SharingPolicy spec.ascend.mode VCannRT): the device-share mode Tessera asks of the
# node's Ascend agent (on|off), the agent's answer (pending|success|failed, the reason in the
# error annotation), and the node label Huawei's Volcano plugin and device plugin select
# soft-sharing nodes by (true|false; docs/facts/ascend.md §vCANN-RT).
NPU_DEVICE_SHARE_LABEL = "tessera.io/npu.device-share"
NPU_DEVICE_SHARE_STATE_LABEL = "tessera.io/npu.device-share.state"
NPU_DEVICE_SHARE_ERROR_ANNOTATION = "tessera.io/npu.device-share.error"
SOFT_SHARE_NODE_LABEL = "huawei.com/scheduler.chip1softsharedev.enable"

ACCELERATOR_RESOURCE_PREFIXES = ("nvidia.com/", "huawei.com/")

# --- SharingPolicy (device-plugin ConfigMap, HAMi node configs) ----------------
# GFD labels the device plugin's node-dependent rules read.
GPU_COMPUTE_MAJOR_LABEL = "nvidia.com/gpu.compute.major"
GPU_COMPUTE_MINOR_LABEL = "nvidia.com/gpu.compute.minor"
# Set by the Ascend device plugin; any of these marks an Ascend node.
NPU_CHIP_NAME_LABEL = "node.kubernetes.io/npu.chip.name"
HAMI_ASCEND_NODE_LABEL = "ascend"
# HAMi's Ascend device plugin DaemonSet runs on nodes labelled ascend=on (its nodeSelector).
HAMI_ASCEND_NODE_VALUE = "on"
# GPU Operator ClusterPolicy devicePlugin.config: ConfigMap in the operator namespace.
DEVICE_PLUGIN_CONFIGMAP_NAMESPACE = "gpu-operator"
DEVICE_PLUGIN_CONFIGMAP_NAME = "device-plugin-configs"
DEVICE_PLUGIN_DEFAULT_KEY = "default"
# Keys of the device-plugin ConfigMap that Tessera wrote (comma list, sorted).
MANAGED_KEYS_ANNOTATION = "tessera.io/managed-keys"
# On a Node: the device-plugin config key Tessera last set (tells hand edits apart).
DEVICE_PLUGIN_CONFIG_APPLIED_ANNOTATION = "tessera.io/device-plugin-config"
# HAMi per-node configs (release "hami" in kube-system).
HAMI_NAMESPACE = "kube-system"
HAMI_NVIDIA_CONFIGMAP_NAME = "hami-device-plugin"
HAMI_NVIDIA_CONFIGMAP_KEY = "config.json"
HAMI_ASCEND_CONFIGMAP_NAME = "hami-device-node-config"
HAMI_ASCEND_CONFIGMAP_KEY = "node-config.yaml"
# On a HAMi ConfigMap: the nodes whose entries Tessera owns fields of (comma list, sorted).
MANAGED_NODES_ANNOTATION = "tessera.io/managed-nodes"
# Written on a Node by HAMi's Ascend device plugin: the physical cards it registered
# (JSON list, one object per card) under <prefix><commonWord>, the commonWord being the
# suffix of its huawei.com/<commonWord> resource; and "true"/"false" for soft slicing.
HAMI_NODE_REGISTER_ANNOTATION_PREFIX = "hami.io/node-register-"
HAMI_VNPU_CORE_ANNOTATION = "hami-vnpu-core"
# Written on a Node by HAMi's NVIDIA device plugin: the GPUs it registered (JSON list, one
# object per GPU, each with its slot "count").
HAMI_NVIDIA_REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
DRAIN_SKIP_LABEL = "tessera.io/drain.skip"
# --- NodePoolGeometry (mig-parted ConfigMap read by the GPU Operator's MIG manager) ---
# Point the GPU Operator at it with migManager.config.name; the key must be config.yaml.
MIG_PARTED_CONFIGMAP_NAMESPACE = "gpu-operator"
MIG_PARTED_CONFIGMAP_NAME = "tessera-mig-parted-config"
MIG_PARTED_CONFIGMAP_KEY = "config.yaml"
# Tessera's Ascend vNPU agent reads its configs from this ConfigMap.
VNPU_CONFIGMAP_NAMESPACE = "tessera-system"
VNPU_CONFIGMAP_NAME = "tessera-vnpu-config"
VNPU_CONFIGMAP_KEY = "config.yaml"
# Set by the Ascend device plugin stand-in / node agent: NPUs on the node.
NPU_COUNT_LABEL = "tessera.io/npu.count"

# --- NVIDIA vGPU Device Manager (GPU Operator, nodes with gpu.workload.config=vm-vgpu) ---
# The device manager applies the config named by the label and reports in the state label
# (pending, success, failed, rebooting). Point the GPU Operator at Tessera's map with
# vgpuDeviceManager.config.name; the key must be config.yaml.
VGPU_CONFIG_LABEL = "nvidia.com/vgpu.config"
VGPU_CONFIG_STATE_LABEL = "nvidia.com/vgpu.config.state"
GPU_WORKLOAD_CONFIG_LABEL = "nvidia.com/gpu.workload.config"
VGPU_CONFIGMAP_NAMESPACE = "gpu-operator"
VGPU_CONFIGMAP_NAME = "tessera-vgpu-devices-config"
VGPU_CONFIGMAP_KEY = "config.yaml"

# --- Schedulers of HAMi slices (SharingPolicy spec.scheduler) -----------------
HAMI_SCHEDULER_CONFIGMAP_NAME = "hami-scheduler-device"  # spec.scheduler.hami.configMap default
HAMI_SCHEDULER_CONFIGMAP_KEY = "device-config.yaml"
# On HAMi's scheduler config: the fields of device-config.yaml Tessera owns, and what each held
# before Tessera set it (JSON), so a released field gets its person's value back.
HAMI_SCHEDULER_MANAGED_ANNOTATION = "tessera.io/managed-fields"
VOLCANO_SCHEDULER_CONFIGMAP_KEY = "volcano-scheduler.conf"
