"""Numerical comparison of nested model outputs (numpy only: no TF, torch or keras).

One module per concern:

- :mod:`.tolerance`: what difference is allowed (dtype defaults, the element rule);
- :mod:`.record`: the :class:`Comparison` of one leaf and its messages;
- :mod:`.masks`: which elements count (the attention mask's one rule);
- :mod:`.stats`: one leaf's statistics over its batches;
- :mod:`.nested`: nested outputs flattened and compared leaf by leaf;
- :mod:`.referee`: the float64 referee's RMSEs, summed batch by batch;
- :mod:`.judge`: the judges (tolerance, float64 referee, budget, cross-backend referee):
  each one's rule, text, refusal of non-finite errors, and the known-difference match.

``actual`` is the side under test (e.g. the ``inputs_embeds`` path, or TensorFlow),
``expected`` the reference (e.g. the ``input_ids`` path, or PyTorch).
"""

from __future__ import annotations

from ..trace import flatten, to_numpy  # a run's arrays, named: trace's, exported here too
from .judge import (
    BudgetJudge,
    CrossBackendReferee,
    Judge,
    Referee,
    ToleranceJudge,
    known_difference_note,
    within,
)
from .masks import POOLED_OUTPUTS, is_pooled, leaf_mask, valid_positions
from .nested import compare_output_batches, compare_outputs
from .record import Comparison, factor_text, failed_comparison, failure_message
from .referee import RefereeResult, RefereeSums, rmse, row_counts, row_rms
from .stats import all_finite, compare_arrays, compare_batches
from .tolerance import (
    Closeness,
    Tolerance,
    ToleranceError,
    check_tolerance_value,
    default_tolerance,
)

__all__ = [
    "POOLED_OUTPUTS",
    "BudgetJudge",
    "Closeness",
    "CrossBackendReferee",
    "Comparison",
    "Referee",
    "RefereeResult",
    "RefereeSums",
    "Tolerance",
    "ToleranceError",
    "ToleranceJudge",
    "all_finite",
    "check_tolerance_value",
    "compare_arrays",
    "compare_batches",
    "compare_output_batches",
    "compare_outputs",
    "default_tolerance",
    "factor_text",
    "failed_comparison",
    "failure_message",
    "flatten",
    "is_pooled",
    "Judge",
    "known_difference_note",
    "leaf_mask",
    "row_counts",
    "rmse",
    "row_rms",
    "to_numpy",
    "valid_positions",
    "within",
]
