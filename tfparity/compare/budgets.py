"""Budgets: how far a quantised or reduced-precision model may be from its reference.

A dynamic-range int8 or float16 model is *meant* to differ from float32, so the float64
referee (which asks a float32 model to be as close to the truth as float32 PyTorch is)
would fail every one of them and say nothing useful. It is judged instead by a
budget, in the spirit of keras-hub's LiteRT test (``{"max": 1e-2, "mean": 1e-3}`` per
output) and tf2onnx's ``ptol``: per compared tensor a largest and a mean absolute
error and a smallest cosine, and over the batch a smallest label or top-1 agreement.
A model Keras quantised is held besides to a distribution budget on an LM head's logits
(KL divergence and same-top-1 share, judged by :mod:`.bootstrap`), never to the float64
referee: it differs from float32 by design.

One table (:data:`BUDGETS`) holds each kind's defaults, keyed by the kind a side says
it is (``float16``, ``dynamic-range int8``, ``keras int8``); :func:`budgets_for` is the
one lookup (a mixed ``keras int4+int8`` takes its coarsest mode's). A user sets any part
(``--budget max=1e-2,mean=1e-3``, ``--kl-budget kl_mean=0.01``). The distribution
defaults, each number cited in docs/quantised.md ("Default budgets"):

- ``kl_mean``: MaxText's ``forward_pass_logit_checker`` accepts a bf16 checkpoint at
  ``--max_kl_div=0.015``; an 8-bit weight format is no coarser than bf16's 8-bit
  mantissa, so int8 and float8 get 0.015 (about 10x llama.cpp's q8_0 on LLaMA 3 8B,
  mean KLD 0.0014). int4 gets 0.05: llama.cpp's 4-bit quants range 0.011 (PR#5081's
  example) to 0.029 (q4_K_M) and 0.043 (IQ4_XS, PR#12557).
- ``same_top1``: Dutta et al. (arXiv 2407.09141) show accuracy can hold while answers
  flip, so flips are budgeted apart from KL. MLPerf inference asks 99% of the fp32
  accuracy; a top-1 share is stricter than accuracy (a flip between two wrong tokens
  counts), so 0.95 for 8-bit, 0.90 for 4-bit (llama.cpp's 4-bit quants: 0.95 and 0.90).

Where the error comes from (the per-layer growth) is :mod:`.growth`'s. Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from ..errors import TfparityError
from .bootstrap import Limit, check_share, parse_limits
from .quantisation import KERAS, ONNX_DYNAMIC_INT8, ONNX_STATIC_INT8, keras_kind
from .record import Comparison


@dataclass(frozen=True)
class Budget:
    """What each compared tensor may differ by (``max``, ``mean`` absolute error, the
    smallest ``cosine``), and the smallest share of labels or top-1 tokens that must
    agree over the batch (``agreement``; a base model has none to count)."""

    max: float
    mean: float
    cosine: float
    agreement: float
    origin: str = "default"  # "default for <kind>", or "set by the user"

    def text(self) -> str:
        return (
            f"max abs error {self.max:g}, mean abs error {self.mean:g}, cosine >= "
            f"{self.cosine:g}, agreement >= {self.agreement:g} ({self.origin})"
        )

    def exceeded(self, c: Comparison) -> list[str]:
        """What of this budget the comparison ``c`` goes over (empty: within)."""
        over = []
        if c.max_abs_diff > self.max:
            over.append(f"max abs error {c.max_abs_diff:.3g} > {self.max:g}")
        if c.mean_abs_diff > self.mean:
            over.append(f"mean abs error {c.mean_abs_diff:.3g} > {self.mean:g}")
        if c.cosine is not None and c.cosine < self.cosine:
            over.append(f"cosine {c.cosine:.6f} < {self.cosine:g}")
        return over


@dataclass(frozen=True)
class KindBudgets:
    """What a model of one kind is held to: per compared tensor (``tensor``), and on an
    LM head's logits by their distribution (``kl``: empty where the kind has no
    default, a LiteRT kind's). ``kind`` is the kind whose defaults these are (a mixed
    kind's coarsest) and ``origin`` says so in the report's words."""

    tensor: Budget
    kl: tuple[Limit, ...] = ()
    kind: str = "float32"
    origin: str = "float32"

    def tensor_budget(self, given: str | Budget | None = None) -> Budget:
        """The per-tensor budget: this kind's default, with what the user ``given`` (a
        :class:`Budget`, or ``"max=1e-2,mean=1e-3"``) put in."""
        base = replace(self.tensor, origin=f"default for {self.origin}")
        if given is None:
            return base
        if isinstance(given, Budget):
            return replace(given, origin="set by the user")
        return parse_tensor_budget(given, base)

    def kl_limits(self, given: Sequence[Limit] | None = None) -> tuple[list[Limit], str]:
        """The distribution limits and where they come from: ``given`` (``--kl-budget``)
        when set, else this kind's default; exit 2 where it has none."""
        if given:
            return list(given), "set by --kl-budget"
        if not self.kl:
            raise TfparityError(
                f"No default distribution budget for quantisation "
                f"{self.origin.removeprefix(KERAS)!r}; give one "
                "with --kl-budget (e.g. kl_mean=0.015,same_top1=0.95)."
            )
        return list(self.kl), f"default for {self.origin.removeprefix(KERAS)}, docs/quantised.md"


# Per-tensor defaults, from tiny BERT and all-MiniLM-L6-v2 (docs/litert.md): about 2-3x
# the error a sound conversion of that kind shows there (float16: keras-hub's own
# {"max": 1e-2, "mean": 1e-3}), so a sound model passes. A budget bounds the damage, it
# does not find every defect: a fault smaller than the quantisation noise (MiniLM's FFN
# weight scaled by 1.1 moves it by 0.2, int8 by 0.28) fits in it. Check the float32
# conversion against the referee for those; the error growth shows where int8 costs most.
_8BIT = Budget(max=0.5, mean=5e-2, cosine=0.99, agreement=0.95)
_4BIT = Budget(max=1.0, mean=0.1, cosine=0.98, agreement=0.9)
BUDGETS: dict[str, KindBudgets] = {
    "float16": KindBudgets(Budget(max=1e-2, mean=1e-3, cosine=0.9999, agreement=0.99)),
    "dynamic-range int8": KindBudgets(_8BIT),
    "full int8": KindBudgets(_4BIT),
    "full int16x8": KindBudgets(_8BIT),
    # A model Keras quantised (model.quantize): int8 and float8 quantise weights per
    # channel and activations on the fly, as LiteRT's dynamic range does, so its budget;
    # int4 is coarser, so full int8's. An LM head's distribution budget decides as well.
    keras_kind("int8"): KindBudgets(_8BIT, tuple(parse_limits("kl_mean=0.015,same_top1=0.95"))),
    keras_kind("float8"): KindBudgets(_8BIT, tuple(parse_limits("kl_mean=0.015,same_top1=0.95"))),
    keras_kind("int4"): KindBudgets(_4BIT, tuple(parse_limits("kl_mean=0.05,same_top1=0.9"))),
    # ONNX Runtime's quantiser (docs/onnx.md, "Quantised ONNX"), measured on
    # all-MiniLM-L6-v2 with its defaults, each file's weights read back within half a
    # step (a sound quantisation): quantize_dynamic's per-tensor int8 weights, at worst
    # max 1.08, mean 0.134, cosine 0.946 (per channel 0.613, 0.059, 0.987); quantize_static
    # (QDQ, MinMax calibration) max 2.36, mean 0.296, cosine 0.758. About twice that, so
    # a sound file passes; what the budget cannot bound, the weights read back through
    # their scales decide exactly (checks/crosscheck/budgeted.py). An LM head's
    # distribution: Keras int8's budget, and full int8's for static.
    ONNX_DYNAMIC_INT8: KindBudgets(
        Budget(max=2.5, mean=0.3, cosine=0.9, agreement=0.9),
        tuple(parse_limits("kl_mean=0.015,same_top1=0.95")),
    ),
    ONNX_STATIC_INT8: KindBudgets(
        Budget(max=5.0, mean=0.6, cosine=0.5, agreement=0.8),
        tuple(parse_limits("kl_mean=0.05,same_top1=0.9")),
    ),
}
# A float32 model judged by budgets on request (--budget with a float32 artefact).
FLOAT32_BUDGET = Budget(max=1e-4, mean=1e-5, cosine=0.99999, agreement=1.0)
_KEYS = {f.name for f in fields(Budget)} - {"origin"}


def budgets_for(kind: str | None) -> KindBudgets:
    """The one lookup: what a model of ``kind`` (None: float32) is held to by default. A
    model Keras quantised in several modes (``keras int4+int8``: one block in int4, the
    rest int8) takes its coarsest mode's (``keras int4``), and says so; a kind the table
    lacks, float32's per-tensor budget and no distribution default."""
    coarsest = coarsest_kind(kind or "")
    found = BUDGETS.get(coarsest, KindBudgets(FLOAT32_BUDGET))
    mixed = f", the coarsest of {kind}" if coarsest != (kind or "") else ""
    return replace(found, kind=coarsest or "float32", origin=f"{coarsest or 'float32'}{mixed}")


def coarsest_kind(kind: str) -> str:
    """A kind Keras quantised in several modes (``keras int4+int8``) by its coarsest
    mode, the one with the largest budget (``keras int4``); any other kind as it is."""
    modes = kind.removeprefix(KERAS).split("+")
    kinds = [keras_kind(m) for m in modes]
    if not kind.startswith(KERAS) or len(modes) < 2 or any(k not in BUDGETS for k in kinds):
        return kind
    return max(kinds, key=lambda k: (BUDGETS[k].tensor.max, BUDGETS[k].tensor.mean))


def parse_tensor_budget(text: str, base: Budget) -> Budget:
    """``"max=1e-2,mean=1e-3,cosine=0.999,agreement=0.99"`` over ``base``; any subset.
    A malformed one is a usage error (exit 2) that names the part that is wrong."""
    changes: dict[str, float] = {}
    for part in (p.strip() for p in str(text).split(",")):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _KEYS:
            raise TfparityError(
                f"Budget part '{part}' is not KEY=VALUE with KEY one of "
                f"{', '.join(sorted(_KEYS))} (e.g. --budget max=1e-2,mean=1e-3)."
            )
        try:
            number = float(value)
        except ValueError:
            raise TfparityError(f"Budget {key}={value!r}: not a number.") from None
        if not np.isfinite(number) or number < 0:
            raise TfparityError(f"Budget {key}={value}: must be a finite number >= 0.")
        if key in ("cosine", "agreement"):
            check_share(f"Budget {key}={value.strip()}", number)
        changes[key] = number
    return replace(base, **changes, origin="set by the user")


def judged_by_budget(c: Comparison, budget: Budget) -> Comparison:
    """``c`` judged by ``budget``: passed when within it; the judge says by what."""
    if c.problem:
        return c
    over = budget.exceeded(c)
    c.passed, c.judge = not over, "budget"
    c.referee = None
    if over:
        c.problem = "Over budget: " + "; ".join(over) + "."
    return c
