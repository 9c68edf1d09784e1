"""tessera.domain.sharing."""
