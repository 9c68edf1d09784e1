"""tessera.observability."""
