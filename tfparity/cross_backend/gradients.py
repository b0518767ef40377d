"""``tfparity backends --gradients``: each backend's gradients judged by the float64
referee's (numpy only; the worker computes them, :mod:`tfparity.adapters.keras_backends.
gradients`).

Every gradient, the one w.r.t. each layer's output and each trainable weight's (and a
float input's), is judged by the forward check's rule (:func:`.backends.judge_layer`:
the other backends' float32 error as the reference, capped by the ceiling), in reverse
topological order, the order backpropagation makes them. The first gradient that a
backend gets wrong, counted backwards, places the fault: a wrong gradient w.r.t. layer
L's output was made by the backward pass of the layers that take L's output (the
gradient w.r.t. their own outputs still agreed), a wrong weight gradient by its own
layer's backward pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..compare.judge import Referee
from ..compare.referee import rmse
from ..results import Divergence, Report
from .hints import layer_hints
from .judge import DEFAULT_CEILING, LayerJudgement, divergence_facts, judge_layer, layer_row

OUTPUT_MARK = ":output"  # a row LAYER:output is the gradient w.r.t. LAYER's output
# A gradient whose float64 RMS is below this fraction of its layer's other gradients' is
# zero in exact arithmetic (a key projection's bias: softmax is invariant to it), and
# what remains is float64 rounding (about 1e-16 of the terms that cancel): float32's
# rounding of the same terms (1e-7 of them) is then no fraction of it that a relative
# rule could bound. 1e-10 lies between the two.
ZERO_FRACTION = 1e-10


@dataclass(frozen=True)
class BackendGradients:
    """Each backend's float32 gradients by row, the float64 referee's (reverse
    topological order), which layer each row belongs to and each layer's consumers."""

    float32: Mapping[str, Mapping[str, np.ndarray]]
    truth: Mapping[str, np.ndarray]
    layer_of: Mapping[str, str]
    consumers: Mapping[str, Sequence[str]] = field(default_factory=dict)
    seed: int = 0
    # per backend, each layer's recorded facts (class, dtype policy, config): the hints
    layer_facts: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)

    @classmethod
    def from_runs(
        cls, runs: Mapping[str, Any], backends: Sequence[str], referee: str, seed: int
    ) -> BackendGradients:
        """From the backends' runs (:class:`~tfparity.adapters.keras_backends.BackendRun`):
        each checked backend's float32 gradients, the referee's float64 ones."""
        facts = runs[referee].gradient_facts["float64"]
        return cls(
            float32={b: runs[b].gradients["float32"] for b in backends},
            truth=runs[referee].gradients["float64"],
            layer_of=facts["layer_of"],
            consumers=facts["consumers"],
            seed=seed,
            layer_facts={b: runs[b].layer_facts for b in backends},
        )


def scalar_text(seed: int) -> str:
    """What is differentiated, as the report says it."""
    return (
        "sum over the model's outputs of sum(output * P), P standard normal from "
        f"numpy.random.default_rng({seed})"
    )


def add_gradients(
    report: Report,
    grads: BackendGradients,
    referee: Referee = Referee(),
    ceiling: float = DEFAULT_CEILING,
) -> Report:
    """Judge every gradient row and add them to the forward ``report``: its comparisons
    (named ``BACKEND:grad:ROW``), ``details["gradients"]`` (rows, scalar, the first
    divergence counted backwards) and its verdict (it fails if either pass fails)."""
    zeros = zero_gradients(grads)
    judgements = [
        judge_layer(
            f"grad:{row}",
            {b: run[row] for b, run in grads.float32.items() if row in run},
            truth,
            referee,
            ceiling,
            scale=zeros[row].scale if row in zeros else None,
        )
        for row, truth in grads.truth.items()
    ]
    report.comparisons = [
        *report.comparisons,
        *(c for j in judgements for c in j.comparisons.values()),
    ]
    report.passed = report.passed and all(not j.failing for j in judgements)
    rows = [
        {**layer_row(j), "gradient": row, "layer": grads.layer_of.get(row, row)}
        | ({"zero": asdict(zeros[row])} if row in zeros else {})
        for row, j in zip(grads.truth, judgements, strict=True)
    ]
    section: dict[str, Any] = {
        "scalar": scalar_text(grads.seed),
        "seed": grads.seed,
        "order": "reverse topological (backwards)",
        "rows": rows,
        "first_divergence": None,
    }
    first = next(
        ((row, j) for row, j in zip(grads.truth, judgements, strict=True) if j.failing), None
    )
    if first is not None:
        f = _first_divergence(*first, grads, list(grads.float32), report)
        section["first_divergence"] = f
        if report.first_divergence is None:  # a forward divergence comes first
            report.first_divergence = Divergence(
                hidden_state=None, layer=f["layer"], component="backward", hint=f["text"]
            )
    report.details["gradients"] = section
    return report


@dataclass(frozen=True)
class ZeroGradient:
    """A gradient zero in exact arithmetic: its float64 RMS (rounding alone), and the
    scale it is judged in instead, the largest RMS of the other gradients of its layer
    (``of``: ``layer NAME``), or of the model's when the layer has no other."""

    rms: float
    scale: float
    of: str


def zero_gradients(grads: BackendGradients) -> dict[str, ZeroGradient]:
    """The rows whose float64 truth is zero but for rounding (below
    :data:`ZERO_FRACTION` of the other gradients of their layer, or of the model's),
    each with the scale its floor and ceiling are then measured in: an absolute floor
    scaled to the gradients around it, not a relative rule on ~0."""
    rms = {row: rmse(t, np.zeros_like(t)) for row, t in grads.truth.items()}
    model = max(rms.values(), default=0.0)
    found = {}
    for row, own in rms.items():
        layer = grads.layer_of.get(row, row)
        others = [r for o, r in rms.items() if o != row and grads.layer_of.get(o, o) == layer]
        scale, of = max(others, default=0.0), f"layer {layer}"
        if not scale:
            scale, of = model, "the model"
        if scale and own <= ZERO_FRACTION * scale:
            found[row] = ZeroGradient(own, scale, of)
    return found


def culprit(row: str, grads: BackendGradients) -> list[str]:
    """The layers whose backward pass made gradient ``row``: for a layer's output, the
    layers taking that output (the output layer itself when none do); for a weight,
    its layer; for an input, the input."""
    layer = grads.layer_of.get(row, row)
    if OUTPUT_MARK in row:
        return list(grads.consumers.get(layer, ())) or [layer]
    return [layer]


def _first_divergence(
    row: str, j: LayerJudgement, grads: BackendGradients, backends: list[str], report: Report
) -> dict[str, Any]:
    """Who parts at the first wrong gradient counted backwards, and which layer's
    backward pass made it (``kind`` as the forward check's)."""
    base = divergence_facts(j, backends, report.details["referee"]["backend"])
    layers = culprit(row, grads)
    rest = [b for b in backends if b not in base["backends"]]
    who = f"backend {', '.join(base['backends'])}" if base["kind"] == "one" else "every backend"
    others = f"{', '.join(rest)} and " if rest else ""
    forward = report.details.get("first_divergence")
    text = (
        f"{who} parts from {others}the float64 referee's gradients, first (counted backwards) at "
        f"the gradient w.r.t. {_subject(row)}: made by the backward pass of layer "
        f"{', '.join(layers)}"
    )
    if forward:
        text += f" (the forward pass already parts at layer {forward['layer']})"
    hints = layer_hints(
        layers[0],
        base["backends"],
        grads.layer_facts,
        report.details["precision"],
        shared=base["kind"] == "all",
    )
    place = {"gradient": row, "layer": layers[0], "layers": layers, "text": text}
    return {**base, **place, "hints": hints}


def _subject(row: str) -> str:
    """``dense_1's output``, ``weight dense_1/kernel`` or ``input x``."""
    if OUTPUT_MARK in row:
        layer, _, rest = row.partition(OUTPUT_MARK)
        return f"{layer}'s output{rest}"
    if row.startswith("input:"):
        return f"input {row.removeprefix('input:')}"
    return f"weight {row}"
