"""tessera.domain.schedulers.hami: everything Tessera writes for HAMi, decided purely.

HAMi's scheduler device config (``device-config.yaml``):

* ``want``    the asks of the policies naming one HAMi config joined (conflicts, traps);
* ``config``  Tessera's fields of the config set and released in place;
* ``owned``   which fields Tessera owns, remembered on the ConfigMap;
* ``guard``   what keeps an edit off a person's keys;
* ``shape``   the list and map forms of ``vnpus``, and moving between them;
* ``load``    whether the targeted HAMi version's scheduler can load the whole file;
* ``restart`` whether the scheduler has read the config since it changed.

Its device plugins' per-node configs (NVIDIA's ``config.json``, Ascend's ``node-config.yaml``),
planned and written with the sharing plan (``tessera.domain.sharing``):

* ``nodes``   Tessera's fields of the per-node entries, as minimal JSON patches.
"""
