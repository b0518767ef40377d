"""Checks: one module each, each a function ``(adapters, batches, options) -> Report``.

The cross-check's ``localise`` modes live here, not in :mod:`.crosscheck`, so that the
CLI can offer them (``--localise``) without importing the checks: one home for the
default that :class:`~tfparity.checks.crosscheck.CrosscheckOptions`,
:func:`tfparity.crosscheck` and ``tfparity crosscheck`` share.
"""

# The sub-layer taps and isolated runs cost about as much as the forward passes, and
# only localise: by default they run when a tensor fails ("always": on every run).
LOCALISE_MODES = ("on_failure", "always")
DEFAULT_LOCALISE = "on_failure"
