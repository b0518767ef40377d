"""tfparity: numerical parity checks for TensorFlow/Keras transformer models.

``import tfparity`` is cheap: TensorFlow and torch are imported only when a check runs
(:mod:`tfparity.api` and :mod:`tfparity.assertions` import them inside their functions).
The API's names are listed once, in ``tfparity.api.__all__``; this package's
``__all__`` adds that list to the types and helpers defined elsewhere.
"""

from __future__ import annotations

from . import api
from ._version import __version__
from .api import *  # noqa: F403 -- the names api.__all__ lists: the API's list is the one list
from .assertions import assert_crosscheck, assert_embeds_parity
from .compare import Comparison, Tolerance, compare_arrays, compare_outputs
from .errors import TfparityError
from .inputs import Batch, InputOptions
from .results import Divergence, Report

__all__ = [
    "Batch",
    "Comparison",
    "Divergence",
    "InputOptions",
    "Report",
    "TfparityError",
    "Tolerance",
    "__version__",
    "assert_crosscheck",
    "assert_embeds_parity",
    "compare_arrays",
    "compare_outputs",
    *api.__all__,
]
