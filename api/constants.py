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

ACCELERATOR_RESOURCE_PREFIXES = ("nvidia.com/", "huawei.com/")
