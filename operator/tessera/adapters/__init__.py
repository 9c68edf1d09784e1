"""tessera.adapters."""
