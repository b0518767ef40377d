"""tfparity: numerical parity checks for TensorFlow/Keras transformer models.

``import tfparity`` is cheap: TensorFlow and torch are imported only when a check runs,
and the API's modules (:mod:`tfparity.api`, :mod:`tfparity.assertions`) only when one of
their names is first used, so that importing a submodule does not pull the API in.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__
from .compare import Comparison, Tolerance, compare_arrays, compare_outputs
from .errors import TfparityError
from .inputs import Batch, InputOptions
from .results import Divergence, Report

# The names of tfparity/api.py: their one list (api.py keeps none of its own).
_API = (
    "assert_close",
    "check_embeds",
    "check_modes",
    "check_positions",
    "check_runtimes",
    "check_tying",
    "crosscheck",
    "diagnose",
    "generate",
    "gradients",
    "load_model",
    "make_batches",
)
# Lazily exported names defined outside api.py -> their module under tfparity.
_ELSEWHERE = {
    "assert_crosscheck": "assertions",
    "assert_embeds_parity": "assertions",
    "assert_generation": "assertions",
    "assert_gradients": "assertions",
    "user_model": "adapters.user.side",
    "backends": "cross_backend",
    "assert_backends": "assertions",
    "BackendWorkers": "adapters.keras_backends.workers",
    # the sides and settings the examples and docs use, under one stable name each
    "ExecutionOptions": "adapters.runtime.execution_options",
    "PTModel": "adapters.reference.pt_model",
    "TFModel": "adapters.hf_tf.tf_model",
    "load_pt": "adapters.reference.pt_model",
    "render": "report",  # dispatched by Report.check (report/__init__.py)
}

__all__ = [
    "Batch",
    "Comparison",
    "Divergence",
    "InputOptions",
    "Report",
    "TfparityError",
    "Tolerance",
    "__version__",
    "compare_arrays",
    "compare_outputs",
    *_API,
    *_ELSEWHERE,
]


def __getattr__(name: str) -> Any:
    if name in _API or name in _ELSEWHERE:
        import importlib

        module = importlib.import_module(f".{_ELSEWHERE.get(name, 'api')}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module 'tfparity' has no attribute {name!r}")
