"""The autopilot's decision: which idle GPUs of a pool change layout so that pending demand fits.

demand   what pends, per profile and for how long; what the pool's free instances already serve
bounds   what a person allowed in Git: profiles per model, min/max counts, the pend threshold,
         reconfigurations per GPU per day, the off switch
choice   decide(gpus, wants, bounds) -> Decision: the fewest idle GPUs reconfigured, with reasons,
         or "nothing fits" and why

Pure: views and the time in, a decision out. The MIG facts come from ``tessera.domain.geometry``
(catalog, placement, packing); this package holds no table of its own.
"""
