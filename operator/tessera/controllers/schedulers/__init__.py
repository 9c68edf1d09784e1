"""tessera.controllers.schedulers: the scheduler configs SharingPolicies name.

* ``sync``    one sync per pass over every scheduler config, the single writer;
* ``hami/``   HAMi's ``device-config.yaml`` (``config``) and whether the scheduler read it
              (``read``);
* ``volcano`` Volcano's ``volcano-scheduler.conf`` and its geometries map.
"""
