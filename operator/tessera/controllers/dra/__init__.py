"""tessera.controllers.dra: DRA's objects (``tessera.domain.dra`` decides).

* ``pool``    a NodePoolGeometry with ``allocation: DRA``, its nodes seen through the driver;
* ``classes`` Tessera's DeviceClasses, shared by pools and policies.
"""
