"""tessera.domain.rollout.dra: how a rollout treats a pool with ``allocation: DRA``.

* ``observe`` raw ResourceSlices and claims → what the engine decides on (``views.DraNode``);
* ``restart`` the driver's kubelet plugin restarted after a MIG change.
"""
