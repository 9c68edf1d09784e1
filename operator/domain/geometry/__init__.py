"""tessera.domain.geometry."""
