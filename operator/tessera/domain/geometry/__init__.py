"""The geometry engine: pure decisions about how GPUs and NPUs can be partitioned.

catalog      MIG models and profiles (mig_catalog.yaml), resolve() ids / GFD product labels
placement    place(model, profiles) -> Placement: validity, start slots, creation order, reason
explaining   the human reasons for refused layouts (collisions, what fits instead)
enumeration  all valid / maximal layouts of a model
packing      pack(model, demand) -> Packing: fewest GPUs and a layout for each
layouts      per-device resolution of a pool's layouts, content-hashed config names
capacity     validate_mig_node(), mig_capacity() under MIG strategy single / mixed
migparted    render_mig_parted(): the mig-parted ConfigMap data for a pool
ascend       Ascend chips and vNPU templates (ascend_catalog.yaml), check_templates()
vnpu         validate_vnpu_node(), vnpu_capacity(), render_vnpu_config() for the node agent
nvidiasmi    `nvidia-smi -L` and device-plugin device IDs -> GPU indices (the GPU node agent)

Nothing here performs I/O beyond reading its own packaged data files.
"""
