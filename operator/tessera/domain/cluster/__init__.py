"""tessera.domain.cluster: the composite tier, above the subpackages it composes.

* ``objects``     raw Kubernetes objects → the values the domain decides on;
* ``pools``       what each node of a NodePoolGeometry should become, and its agent configs;
* ``claims``      exactly one NodePoolGeometry per node;
* ``empty_pools`` a pool whose nodeSelector matches no node: never a green light;
* ``demand``      a pool's pending pods, usage and layouts as ``tessera suggest``'s inputs.
"""
