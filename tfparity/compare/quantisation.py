"""What a Keras-quantised model is held to, and which layer its error comes from.

A quantised model is judged by the field's distribution budgets (KL divergence and
same-top-1 share, :mod:`.bootstrap`), never by the float64 referee: it differs from
float32 by design. Each mode has a default, each number cited in docs/quantised.md
("Default budgets"):

- ``kl_mean``: MaxText's ``forward_pass_logit_checker`` accepts a bf16 checkpoint at
  ``--max_kl_div=0.015``; an 8-bit weight format is no coarser than bf16's 8-bit
  mantissa, so int8 and float8 get 0.015 (about 10x llama.cpp's q8_0 on LLaMA 3 8B,
  mean KLD 0.0014). int4 gets 0.05: llama.cpp's 4-bit quants range 0.011 (PR#5081's
  example) to 0.029 (q4_K_M) and 0.043 (IQ4_XS, PR#12557).
- ``same_top1``: Dutta et al. (arXiv 2407.09141) show accuracy can hold while answers
  flip, so flips are budgeted apart from KL. MLPerf inference asks 99% of the fp32
  accuracy; a top-1 share is stricter than accuracy (a flip between two wrong tokens
  counts), so 0.95 for 8-bit, 0.90 for 4-bit (llama.cpp's 4-bit quants: 0.95 and 0.90).

Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TfparityError
from .bootstrap import Limit, parse_budget
from .budgets import coarsest_kind

DEFAULT_KL_BUDGETS: dict[str, str] = {
    "int8": "kl_mean=0.015,same_top1=0.95",
    "float8": "kl_mean=0.015,same_top1=0.95",
    "int4": "kl_mean=0.05,same_top1=0.9",
}


def kl_budget_for(mode: str, given: Sequence[Limit] | None = None) -> tuple[list[Limit], str]:
    """The limits a model quantised to ``mode`` is judged by, and where they come from:
    ``given`` (``--kl-budget``) when set, else the mode's default."""
    if given:
        return list(given), "set by --kl-budget"
    if mode not in DEFAULT_KL_BUDGETS:
        raise TfparityError(
            f"No default distribution budget for quantisation {mode!r}; give one with "
            "--kl-budget (e.g. kl_mean=0.015,same_top1=0.95)."
        )
    return parse_budget(DEFAULT_KL_BUDGETS[mode]), f"default for {mode}, docs/quantised.md"


def kind_kl_budget(kind: str | None) -> list[Limit] | None:
    """The default distribution budget of a side quantised by Keras (its kind
    ``keras int8``: a quantised ``.keras`` file read as it is; ``keras int4+int8``: its
    coarsest mode's); None for other kinds."""
    mode = coarsest_kind(kind or "").removeprefix("keras ")  # a mixed one: its coarsest
    if not (kind or "").startswith("keras ") or mode not in DEFAULT_KL_BUDGETS:
        return None
    return parse_budget(DEFAULT_KL_BUDGETS[mode])
