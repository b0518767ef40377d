"""``tfparity runtimes``: one artefact on each of its kernel sets (:mod:`.check`).

A sub-package ranked with generation and gradients: against a source it judges each
run by the cross-check (:mod:`tfparity.checks.crosscheck`), so it sits above it.
"""

from .check import RuntimesOptions, check_runtimes, random_inputs

__all__ = ["RuntimesOptions", "check_runtimes", "random_inputs"]
