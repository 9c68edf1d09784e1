"""tessera.handlers."""
