"""Budgets: how far a quantised or reduced-precision model may be from its reference.

A dynamic-range int8 or float16 model is *meant* to differ from float32, so the float64
referee (which asks a float32 model to be as close to the truth as float32 PyTorch is)
would fail every one of them and say nothing useful. It is judged instead by a
budget, in the spirit of keras-hub's LiteRT test (``{"max": 1e-2, "mean": 1e-3}`` per
output) and tf2onnx's ``ptol``: per compared tensor a largest and a mean absolute
error and a smallest cosine, and over the batch a smallest label or top-1 agreement.
Each kind has a documented default (:data:`DEFAULT_BUDGETS`); a user sets any part
(``--budget max=1e-2,mean=1e-3``). Numpy only.

The per-layer error growth says where the error comes from: each hidden state's error
relative to the reference's size, and what each layer adds to it; the layer that adds
most is the one that quantises worst.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from ..errors import TfparityError
from ..trace import layer_of
from .masks import leaf_mask
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


# Defaults per kind, from tiny BERT and all-MiniLM-L6-v2 (docs/litert.md): about 2-3x
# the error a sound conversion of that kind shows there (float16: keras-hub's own
# {"max": 1e-2, "mean": 1e-3}), so a sound model passes. A budget bounds the damage, it
# does not find every defect: a fault smaller than the quantisation noise (MiniLM's FFN
# weight scaled by 1.1 moves it by 0.2, int8 by 0.28) fits in it. Check the float32
# conversion against the referee for those; the error growth shows where int8 costs most.
DEFAULT_BUDGETS: dict[str, Budget] = {
    "float16": Budget(max=1e-2, mean=1e-3, cosine=0.9999, agreement=0.99),
    "dynamic-range int8": Budget(max=0.5, mean=5e-2, cosine=0.99, agreement=0.95),
    "full int8": Budget(max=1.0, mean=0.1, cosine=0.98, agreement=0.9),
    "full int16x8": Budget(max=0.5, mean=5e-2, cosine=0.99, agreement=0.95),
    # A .keras file Keras quantised (model.quantize): int8 and float8 quantise weights per
    # channel and activations on the fly, as LiteRT's dynamic range does, so its budget;
    # int4 is coarser, so full int8's. An LM head's distribution budget decides as well
    # (tfparity/compare/quantisation.py).
    "keras int8": Budget(max=0.5, mean=5e-2, cosine=0.99, agreement=0.95),
    "keras float8": Budget(max=0.5, mean=5e-2, cosine=0.99, agreement=0.95),
    "keras int4": Budget(max=1.0, mean=0.1, cosine=0.98, agreement=0.9),
}
# A float32 model judged by budgets on request (--budget with a float32 artefact).
FLOAT32_BUDGET = Budget(max=1e-4, mean=1e-5, cosine=0.99999, agreement=1.0)
_KEYS = {f.name for f in fields(Budget)} - {"origin"}


def budget_for(kind: str | None, given: str | Budget | None = None) -> Budget:
    """The budget a model of ``kind`` (None: float32) is judged by: its default, with
    what the user ``given`` (a :class:`Budget`, or ``"max=1e-2,mean=1e-3"``) put in."""
    coarsest = coarsest_kind(kind or "")
    base = DEFAULT_BUDGETS.get(coarsest, FLOAT32_BUDGET)
    mixed = f", the coarsest of {kind}" if coarsest != (kind or "") else ""
    base = replace(base, origin=f"default for {coarsest or 'float32'}{mixed}")
    if given is None:
        return base
    if isinstance(given, Budget):
        return replace(given, origin="set by the user")
    return parse_budget(given, base)


def coarsest_kind(kind: str) -> str:
    """A model Keras quantised in several modes (``keras int4+int8``: one block in int4,
    the rest int8) by its coarsest mode, the one with the largest budget (``keras
    int4``); any other kind as it is."""
    modes = kind.removeprefix("keras ").split("+")
    kinds = [f"keras {m}" for m in modes]
    if (
        not kind.startswith("keras ")
        or len(modes) < 2
        or any(k not in DEFAULT_BUDGETS for k in kinds)
    ):
        return kind
    return max(kinds, key=lambda k: (DEFAULT_BUDGETS[k].max, DEFAULT_BUDGETS[k].mean))


def parse_budget(text: str, base: Budget) -> Budget:
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


def check_share(what: str, number: float) -> None:
    """Exit 2 where ``number``, a share (cosine, agreement, ``same_top1``), is over 1:
    ``95`` was meant as a percentage, so its share is suggested (``95 -> 0.95``). One
    message for ``--budget`` and ``--kl-budget``."""
    if number > 1:
        hint = f" (a percentage? {number:g} -> {number / 100:g})" if number <= 100 else ""
        raise TfparityError(f"{what}: a share, at most 1{hint}.")


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


# ----------------------------------------------------------------------------- growth


@dataclass(frozen=True)
class LayerError:
    """One hidden state's error relative to the reference's size (RMS of the
    difference over RMS of the reference, valid tokens only), and what the layer that
    made it added to the error of its input."""

    hidden_state: int
    layer: int | str  # "embeddings" for hidden state 0
    relative_error: float
    added: float  # relative_error minus the previous hidden state's

    @property
    def growth(self) -> float | None:
        """How many times the error of its input this layer's output has (None: from 0)."""
        before = self.relative_error - self.added
        return self.relative_error / before if before > 0 else None


def error_growth(
    actual: Sequence[Sequence[np.ndarray]],
    expected: Sequence[Sequence[np.ndarray]],
    masks: Sequence[np.ndarray | None],
) -> list[LayerError]:
    """Per hidden state ``k`` (``actual[b][k]``: batch ``b``'s hidden state ``k``), its
    relative error and what its layer added."""
    rows: list[LayerError] = []
    before = 0.0
    for k in range(len(expected[0]) if expected else 0):
        diff = ref = 0.0
        for a, e, mask in zip(actual, expected, masks, strict=True):
            keep = leaf_mask(mask, np.shape(e[k]), f"hidden_states[{k}]")
            d = np.asarray(a[k], np.float64) - np.asarray(e[k], np.float64)
            r = np.asarray(e[k], np.float64)
            if keep is not None:
                d, r = d[keep], r[keep]
            diff += float(np.sum(d * d))
            ref += float(np.sum(r * r))
        relative = float(np.sqrt(diff / ref)) if ref > 0 else 0.0
        rows.append(LayerError(k, layer_of(k), relative, relative - before))
        before = relative
    return rows


def worst_layer(rows: Sequence[LayerError]) -> LayerError | None:
    """The layer that adds the most error (the one that quantises worst)."""
    return max(rows, key=lambda r: r.added, default=None)


def ranked_layers(rows: Sequence[LayerError]) -> list[LayerError]:
    """The layers, the one that adds the most error first (``llm-compressor#1990``'s
    question, "which layer hurts quant accuracy?"): its first is :func:`worst_layer`'s
    (a tie keeps the earlier layer first, as ``max`` does)."""
    return sorted(rows, key=lambda r: -r.added)
