"""tessera.controllers."""
