"""tessera.controllers.schedulers.hami: HAMi's scheduler device config, written and read back."""
