"""tessera.agent: node agents Tessera ships (the Ascend vNPU agent)."""
