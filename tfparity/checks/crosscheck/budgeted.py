"""The cross-check's judgement of a quantised or reduced-precision TF side: by budgets.

A side whose artefact is quantised (``TFSide.quantisation``: dynamic-range int8,
float16, full int8) is never judged by the float64 referee, silently or otherwise: it
differs from float32 by design. Every compared tensor is held to the budget of its
kind (:mod:`tfparity.compare.budgets`, settable by the user), label or top-1
agreement over the batch too, and the report says so in its judge line. Where it goes
over, the first hidden state over budget is the divergence; either way the per-layer
error growth names the layer that quantises worst.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from ...compare import Comparison, failed_comparison
from ...compare.budgets import Budget, budgets_for
from ...compare.dequantised import StepsOff, steps_off
from ...compare.growth import (
    LayerError,
    LayerOver,
    error_growth,
    has_limit,
    limits_text,
    over_limit,
    ranked_layers,
    unjudged,
    worst_layer,
)
from ...compare.quantisation import growth_mode
from ...compare.tensor_metrics import tensor_errors
from ...results import Divergence
from ...trace import Trace, hidden_state_index, layer_of, layer_text
from .agreement import Agreement


def budget_of(quantisation: str | None, given: str | Budget | None) -> Budget | None:
    """The budget that judges a side of this ``quantisation`` (None: float32), or None
    for a float32 side the user set no budget for (the referee judges it)."""
    if quantisation is None and given is None:
        return None
    return budgets_for(quantisation).tensor_budget(given)


def agreement_failures(agreement: Sequence[Agreement], budget: Budget) -> list[Comparison]:
    """A failing row for each agreement under ``budget``'s share (the tensors are judged
    by its :class:`~tfparity.compare.judge.BudgetJudge`)."""
    rows = []
    for a in agreement:
        if a.measure in ("label", "top-1") and a.rate < budget.agreement:
            rows.append(
                failed_comparison(
                    f"{a.measure} agreement ({a.output})",
                    f"Over budget: {a.measure} agreement {a.rate:.3f} < {budget.agreement:g} "
                    f"({a.agree:g} of {a.total}).",
                    [a.total],
                    "int64",
                )
            )
    return rows


def growth(tf: Sequence[Trace], pt: Sequence[Trace], masks: Sequence[Any]) -> list[LayerError]:
    """Per hidden state both sides hold, its relative error and what its layer added."""
    if not tf or not pt:
        return []
    names = [n for n in pt[0] if hidden_state_index(n) is not None and n in tf[0]]
    return error_growth(
        [[np.asarray(t[n]) for n in names] for t in tf],
        [[np.asarray(p[n]) for n in names] for p in pt],
        list(masks),
    )


# The rows that judge no tensor by its budget (their names): a layer over its growth
# limit, and a weight its scale reads back off the reference's.
GROWTH_ROW = ": growth "
SCALE_ROW = "weight scale: "


def growth_failures(over: Sequence[LayerOver], what: str, alone: str = "") -> list[Comparison]:
    """A failing row per layer over its growth limit (:mod:`tfparity.compare.growth`),
    named by the layer and its factor; ``what`` says against what (``quantised int8 vs
    float``); ``alone``: ``--attribute``'s hint, where it ran."""
    return [
        failed_comparison(
            f"{what}{GROWTH_ROW}(hidden_states[{o.hidden_state}])",
            f"Over the per-layer budget: {o.text()}: a correct quantisation adds far less "
            f"at one layer (docs/quantised.md); look at this layer's quantised weights{alone}.",
            [1],
            "float64",
        )
        for o in over
    ]


def scale_failures(weights: Any, pt_weights: Callable[[], dict[str, Any]]) -> list[StepsOff]:
    """The side's integer weights (``weights``: its weight map) read back through their
    scales more than a step from PyTorch's (:mod:`tfparity.compare.dequantised`);
    ``pt_weights`` is called only where the side holds such weights."""
    stored, reference = weights.dequantised(pt_weights)
    return steps_off(stored, reference)


def scale_rows(off: Sequence[StepsOff]) -> list[Comparison]:
    """A failing row per weight its scale reads back off the reference's."""
    return [
        failed_comparison(
            f"{SCALE_ROW}{s.weight.name}",
            f"Off the reference's weight: {s.text()}; the scale, not the rounding, is wrong.",
            list(s.weight.values.shape),
            "float64",
        )
        for s in off
    ]


def growth_judged(
    rows: Sequence[LayerError], kind: str | None, modes: dict[int | str, str] | None = None
) -> tuple[list[LayerOver], dict[str, Any]]:
    """A side Keras quantised (``kind`` ``keras MODE``, a stored file) held to the
    per-layer growth limit of its mode; a mixed-mode one's layers each by their own
    (``modes``: layer -> mode). The layers over it, and ``details["growth"]``. Other
    kinds, and Keras modes no limit was measured for, are not held to it (empty)."""
    mode = growth_mode(kind)
    if mode is None or not has_limit(mode) or not rows:
        return [], {}
    over = over_limit(rows, mode, modes)
    found: dict[str, Any] = {"limit": limits_text(mode, modes), "over": [asdict(o) for o in over]}
    if modes:
        found["modes"] = {str(layer): m for layer, m in modes.items()}
        found["coarser_than_their_input"] = unjudged(rows, modes)  # not held to a limit
    return over, {"growth": found | {"verdict": "FAIL" if over else "PASS"}}


def worst_text(rows: Sequence[LayerError]) -> str | None:
    worst = worst_layer(rows)
    if worst is None:
        return None
    where = layer_text(worst.hidden_state, "embeddings")
    times = f", x{worst.growth:.3g} its input's" if worst.growth else ""
    return (
        f"{where} (hidden_states[{worst.hidden_state}]): adds {worst.added:.3g} relative "
        f"error, to {worst.relative_error:.3g}{times}"
    )


def divergence(
    comparisons: list[Comparison],
    rows: Sequence[LayerError],
    quantisation: str | None,
    over: Sequence[LayerOver] = (),
    scales_on: Callable[[int | str], list[str]] | None = None,
    scales_off: Sequence[StepsOff] = (),
) -> Divergence | None:
    """The first hidden state over budget (else the layer over its growth limit, else the
    first output), with the worst layer (and its scales, where ``scales_on`` names them:
    the side's weight map's ``scales_on``); a weight scale off its weight
    (``scales_off``) is the divergence before any, at its layer's output."""
    failing = [c for c in comparisons if not c.passed]
    if not failing:
        return None
    hidden = sorted(k for c in failing if (k := hidden_state_index(c.name)) is not None)
    budgeted = [c for c in failing if GROWTH_ROW not in c.name and SCALE_ROW not in c.name]
    hint = f"over the {quantisation or 'float32'} budget from here; " if budgeted else ""
    worst = worst_text(rows)
    if worst:
        hint += f"the layer that quantises worst is {worst}; "
        scales = scales_on(worst_layer(rows).layer) if scales_on is not None else []
        hint += f"its weight scales: {', '.join(scales)}; " if scales else ""
    if over:
        hint += f"{over[0].text()}; "
        hidden = hidden or [over[0].hidden_state]
    hint = hint.removesuffix("; ")
    placed = [s for s in scales_off if s.weight.layer is not None]
    first = (placed or list(scales_off))[:1]  # the fact found first: a scale read back wrong
    hint = "; ".join([*(s.text() for s in first), *([hint] if hint else [])])
    if placed:
        layer = placed[0].weight.layer
        k = 0 if layer == "embeddings" else int(layer) + 1  # type: ignore[arg-type]
        return Divergence(k, layer_of(k), None, hint)
    if not hidden:
        return Divergence(None, "head", "head", hint)
    k = hidden[0]
    return Divergence(k, layer_of(k), None, hint)


def quantiser_figures(
    tf: Sequence[Trace], pt: Sequence[Trace], masks: Sequence[Any]
) -> dict[str, Any]:
    """``details["tensor_errors"]``: MSE, SNR (dB) and cosine of every tensor both
    sides hold, ai-edge-quantizer's per-tensor figures, beside the budget's."""
    return {"tensor_errors": [asdict(e) for e in tensor_errors(tf, pt, list(masks))]}


# How many of the ranked layers the report's text line names.
TOP_LAYERS = 3


def details(rows: Sequence[LayerError], quantisation: str | None) -> dict[str, Any]:
    """The quantisation found, the worst layer, the layers ranked by the error each
    adds (``layer_ranking``, with a text line naming the first :data:`TOP_LAYERS`:
    ``worst_layers``) and the error growth in layer order."""
    found: dict[str, Any] = {"quantisation": quantisation or "none"}
    worst = worst_text(rows)
    if worst:
        found["worst_layer"] = worst
    ranking = ranked_layers(rows)
    if ranking:
        found["worst_layers"] = (
            ", ".join(
                f"{layer_text(r.hidden_state, 'embeddings')} {r.added:+.3g}"
                for r in ranking[:TOP_LAYERS]
            )
            + " (relative error each adds)"
        )
    found["layer_ranking"] = [
        {"rank": i, **asdict(r), "growth": r.growth} for i, r in enumerate(ranking, 1)
    ]
    found["error_growth"] = [{**asdict(r), "growth": r.growth} for r in rows]
    return found
