"""Shared test helpers: polling with a deadline (never sleep to synchronise)."""
