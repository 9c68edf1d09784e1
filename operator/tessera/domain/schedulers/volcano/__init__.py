"""tessera.domain.schedulers.volcano: Volcano's scheduler config and the map it points at.

* ``plan``       what one ``volcano-scheduler.conf`` should hold for the policies naming it;
* ``conf``       reading and editing the ``deviceshare`` plugin's arguments in place;
* ``geometries`` Tessera's ConfigMap of known geometries that ``deviceshare`` reads;
* ``restart``    whether the scheduler has read the change, and the restart that makes it.
"""
