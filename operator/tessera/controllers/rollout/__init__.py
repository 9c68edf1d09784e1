"""tessera.controllers.rollout: the cordon/drain/verify rollout engine's side of the API.

* ``driver``     observations in, the engine's actions out, for pools and sharing switches;
* ``node_patch`` one write for a run of one node's actions;
* ``evictions``  the Eviction API, and which PDB holds a drain up;
* ``recount``    the budget recounted right after a cordon.
"""
