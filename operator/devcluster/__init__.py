"""tessera.devcluster."""
