"""tessera.cli."""
