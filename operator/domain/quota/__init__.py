"""tessera.domain.quota."""
