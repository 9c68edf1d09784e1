"""TenantQuota, decided purely: the controller calls these once per reconcile.

``membership.resolve`` (all tenants' matched namespaces) → ``objects.read`` (every
Tessera ResourceQuota listed by ``objects.selector()``) → ``planning.plan`` (write
``QuotaPlan.next_wave``, then reconcile again) → ``reporting.commitment`` /
``overcommitted`` / ``verdict`` / ``status``. ``allocation`` explains how a
tenant-wide total is split without ever being exceeded.
"""
