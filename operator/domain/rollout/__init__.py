"""tessera.domain.rollout."""
