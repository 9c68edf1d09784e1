"""tessera.domain.rollout.dra: how a rollout treats a pool with ``allocation: DRA``.

* ``observe`` raw ResourceSlices and claims → what the engine decides on (``views.DraNode``);
* ``claims`` who holds which GPU, from the ResourceClaims;
* ``restart`` the driver's kubelet plugin restarted after a MIG change;
* ``taints`` the DeviceTaintRules that keep new claims off the devices that change.
"""
