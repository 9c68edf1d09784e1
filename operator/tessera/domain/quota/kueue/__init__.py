"""TenantQuota in Kueue's language (``spec.enforcement: Kueue | Both``; Kueue v0.17.0, v1beta2).

Per tenant Tessera writes and owns a Cohort ``tessera-<tenant>``; per namespace a ClusterQueue
``tessera-<namespace>`` in that cohort and a LocalQueue ``tessera`` pointing at it; per pool
a ResourceFlavor ``tessera-<pool>`` (the pool's ``nodeSelector.matchLabels`` as
``nodeLabels``, the taints all its nodes carry as ``tolerations``), shared by every tenant.

``shares`` splits the capacity ledger: each pool's count of a resource among the tenants that
promise it (equal shares, each capped by its promise), then a tenant's share of a pool among
its namespaces: ``nominalQuota`` is the namespace's equal part, ``borrowingLimit`` lets it
take, from the other namespaces of its cohort, up to ``hard`` (or the tenant's whole share).
So the nominal quotas of all ClusterQueues on a flavor never sum past what the pool holds,
and a cohort holds only its tenant's queues: borrowing never leaves the tenant.

``objects`` builds the manifests, ``plan`` compares them with what the API server holds: an
object of one of these names that Tessera does not own (its labels) is never touched and is
reported as a clash (``Stalled``, naming it).
"""
