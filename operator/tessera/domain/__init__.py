"""tessera.domain."""
