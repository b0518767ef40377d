"""Checks: one module each, each a function ``(adapters, batches, options) -> Report``."""
