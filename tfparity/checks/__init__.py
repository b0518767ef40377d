"""Checks: one module each, each a function ``(adapters, batches, options) -> Report``.

The cross-check's ``localise`` and ``referee`` modes live here, not in
:mod:`.crosscheck.check`, so that the CLI can offer them (``--localise``, ``--referee``)
without importing the checks: one home for the defaults that
:class:`~tfparity.checks.crosscheck.check.CrosscheckOptions`, :func:`tfparity.crosscheck` and
``tfparity crosscheck`` share.
"""

# The sub-layer taps and isolated runs cost about as much as the forward passes, and
# only localise: by default they run when a tensor fails ("always": on every run).
LOCALISE_MODES = ("on_failure", "always")
DEFAULT_LOCALISE = "on_failure"

# The float64 referee's runs: "lazy" stops once the batches left cannot change a verdict
# (an exact bound, tfparity.compare.RefereeSums.settled), "full" runs every batch. The
# sweep's --referee takes the same two words (its lazy referee decides per item).
REFEREE_RUNS = ("lazy", "full")
DEFAULT_REFEREE_RUNS = "lazy"
