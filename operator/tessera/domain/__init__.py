"""tessera.domain: every decision Tessera makes, pure (values in, values out) and table-tested.

Tiers, bottom to top (import-linter's "The domain's tiers" contract keeps the order):

* ``base``       leaves every tier uses: kstatus conditions, failure kinds, label selectors,
                 the idle-pass check, the writer Lease, rule errors and notes;
* ``geometry``   how GPUs and NPUs can be partitioned (MIG, vNPU, vGPU catalogs, npu-smi);
* ``dra``        DeviceClasses and ResourceSlices of pools with ``allocation: DRA``;
* ``rollout``    the node-by-node rollout engine and its disruption budget (``rollout/dra/``:
                 how a rollout treats a DRA pool);  ``schedulers``  HAMi's and Volcano's
                 scheduler configs, a folder per vendor;
* ``sharing``    SharingPolicy's device-plugin, HAMi node and label side;  ``quota``
                 TenantQuota;  ``admission``  a policy's pod contract;  ``autopilot``
                 which idle GPUs change layout for pending demand, inside declared bounds;
* ``cluster``    the composite tier: raw objects → the values above (``objects``), what each
                 node of a pool should become (``pools``), who owns a node (``claims``), pools
                 that select no node (``empty_pools``);
* ``preview``    ``tessera plan``: manifests read, the whole previewed, rendered.
"""
