"""``tfparity backends --quantize``: do the backends compute the same quantised model?

Keras quantises once, on TensorFlow, and every backend loads that one quantised
``.keras`` (:mod:`tfparity.cross_backend.quantised`). Two questions, judged apart:

- **Across backends**, layer by layer (every layer and sublayer the worker taps, as for
  a float model): the backends run the *same* quantised model, so they must agree with
  each other as closely as float runs must agree with their float64 referee. Each
  backend's RMSE to the nearest other backend's output is held to the float
  cross-backend ceiling (``--ceiling``, 1e-4 x the layer's RMS; in units of a
  half-precision layer's rounding, :func:`tfparity.compare.rounding.widened`). Clean
  runs agree within float32 rounding (about 1e-7 relative on the example model and a
  keras-hub GPT-2 ``CausalLM``): the int8 kernels are the same integers on every
  backend, only the float scales round. The first layer where a backend parts is
  named; with two backends the anchor (TensorFlow, where Keras quantised) is taken
  as the right one.
- **The quantisation's own error**: Keras cannot run a quantised model at float64 (its
  int8 kernels and scales are not a float model's weights), so each backend's final
  output is judged against the *float* model's float64 referee by the mode's budgets
  (:mod:`tfparity.compare.budgets`: per tensor; on logits over the vocabulary, a
  keras-hub task's, also the distribution budget, by a bootstrap over rows). Absent
  for a file already quantised (no float model).

Numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from ..compare import Comparison
from ..compare.bootstrap import BootstrapVerdict, Limit, bootstrap_verdict
from ..compare.budgets import Budget, budgets_for
from ..compare.distribution import position_metrics, summarise
from ..compare.judge import BudgetJudge, within
from ..compare.quantisation import keras_kind
from ..compare.referee import rmse
from ..compare.rounding import widened
from ..compare.stats import compare_batches
from ..results import Divergence, Report
from .hints import layer_hints
from .judge import DEFAULT_CEILING, LayerJudgement, layer_policies, layer_roundings, layer_row

FLOAT = "float64 referee"


@dataclass(frozen=True)
class QuantisedOutputs:
    """Each backend's run of the quantised model (per recorded name, topological: the
    last is the model's output), the backend Keras quantised on (``anchor``), and the
    float model's float64 run (None for a file already quantised). ``vocabulary``: the
    smallest Embedding's input size, which makes an output of that width logits."""

    model: str
    mode: str
    runs: Mapping[str, Mapping[str, np.ndarray]]
    anchor: str
    float_truth: Mapping[str, np.ndarray] | None
    referee_backend: str
    vocabulary: int | None = None
    quantised_here: bool = True
    precision: Mapping[str, Any] = field(default_factory=dict)
    notes: Sequence[str] = ()
    layer_facts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    parents: Mapping[str, str] = field(default_factory=dict)

    @property
    def output(self) -> str:
        """The model's output: the last name the anchor recorded."""
        return list(self.runs[self.anchor])[-1]


@dataclass(frozen=True)
class Judged:
    """One backend against one reference: the per-tensor comparison, and the
    distribution statistics and verdict where the output is logits."""

    backend: str
    against: str
    comparison: Comparison
    distribution: dict[str, Any] | None = None
    verdict: BootstrapVerdict | None = None

    @property
    def failures(self) -> list[Comparison]:
        found = [] if self.comparison.passed else [self.comparison]
        if self.verdict is None:
            return found
        name = f"{self.backend}: distribution {{metric}} vs {self.against}"
        return found + self.verdict.failures(name, items="rows")

    def row(self) -> dict[str, Any]:
        c = self.comparison
        found = {"backend": self.backend, "against": self.against, "passed": not self.failures}
        found |= {"max_abs_diff": c.max_abs_diff, "mean_abs_diff": c.mean_abs_diff}
        found |= {"cosine": c.cosine, "problem": c.problem}
        if self.distribution is not None:
            found["distribution"] = self.distribution
        return found


def is_logits(output: np.ndarray, vocabulary: int | None) -> bool:
    """Whether a final output is logits over the model's vocabulary (its last axis as
    wide as the smallest Embedding's input), so distribution metrics apply."""
    return vocabulary is not None and np.ndim(output) >= 2 and np.shape(output)[-1] == vocabulary


def judge_one(
    backend: str,
    against: str,
    actual: np.ndarray,
    expected: np.ndarray,
    budget: Budget,
    limits: Sequence[Limit] | None,
) -> Judged:
    """``actual`` against ``expected`` by the per-tensor ``budget`` and, with
    ``limits`` (logits), by the distribution budget over rows (each row an item)."""
    c = BudgetJudge(budget).judge(f"{backend} vs {against}", [actual], [expected])
    if not limits or np.shape(actual) != np.shape(expected):
        return Judged(backend, against, c)
    metrics = position_metrics(expected, actual)
    verdict = bootstrap_verdict(metrics, limits)
    stats = asdict(summarise(metrics)) | {"budget": verdict.details()}
    return Judged(backend, against, c, stats, verdict)


def judge_across(
    layer: str,
    outputs: Mapping[str, np.ndarray],
    anchor: str,
    ceiling: float,
    rounding: str = "float32",
) -> LayerJudgement:
    """Every backend's output of ``layer`` against the nearest other backend's: its RMSE
    to it at most the ceiling (for a layer rounding like ``rounding``) times the
    anchor's RMS there. One backend alone has none to be compared with: it passes."""
    reference = outputs.get(anchor, next(iter(outputs.values())))
    scale = rmse(reference, np.zeros_like(reference))
    allowed = widened(0.0, ceiling, rounding)[1] * scale
    judged, spread = {}, 0.0
    for backend, actual in outputs.items():
        others = {
            o: rmse(actual, a) if np.shape(a) == np.shape(actual) else np.inf
            for o, a in outputs.items()
            if o != backend
        }
        if not others:
            judged[backend] = replace(
                compare_batches([actual], [actual], name=f"{backend}:{layer}"), judge="backends"
            )
            continue
        nearest = min(others, key=lambda o: others[o])
        c = compare_batches(
            [actual], [outputs[nearest]], name=f"{backend}:{layer}", check_dtype=False
        )
        spread = max([spread, *(e for e in others.values() if np.isfinite(e))])
        if c.problem:  # a shape or non-finite problem keeps its own verdict
            judged[backend] = c
            continue
        bound = {"actual_rmse": others[nearest], "allowed_rmse": allowed}
        passed = within(others[nearest], allowed)
        judged[backend] = replace(c, passed=passed, judge="backends", referee=bound)
    return LayerJudgement(layer, judged, spread, scale, rounding)


def parting(j: LayerJudgement, backends: list[str], anchor: str) -> dict[str, Any]:
    """Who parts at the first layer where a backend fails: the failing backends where
    some agree (``one``); with two backends that disagree, the one that is not the
    anchor (``one``: which is at fault, a third backend would tell); with more, none
    agreeing, every one (``all``, the furthest named)."""
    failing = j.failing
    if len(failing) == len(backends) == 2 and anchor in failing:
        failing = [b for b in failing if b != anchor]
    rest = [b for b in backends if b not in failing]

    def distance(b: str) -> float:
        return float((j.comparisons[b].referee or {}).get("actual_rmse", np.inf))

    if rest:
        text = (
            f"backend {', '.join(failing)} parts from {', '.join(rest)} on the same "
            f"quantised model at layer {j.layer}"
        )
        if len(backends) == 2:
            text += f" ({anchor}, where Keras quantised, taken as right: a third backend tells)"
        return {
            "backend": max(failing, key=distance),
            "backends": failing,
            "layer": j.layer,
            "kind": "one",
            "text": text,
        }
    text = (
        f"no two backends ({', '.join(backends)}) agree on the quantised model at layer {j.layer}"
    )
    worst = max(failing, key=distance)
    return {"backend": worst, "backends": failing, "layer": j.layer, "kind": "all", "text": text}


def check_quantised_backends(
    q: QuantisedOutputs,
    kl_budget: Sequence[Limit] | None = None,
    ceiling: float = DEFAULT_CEILING,
) -> Report:
    """The backends against each other layer by layer, then the quantisation's budget
    at the output against the float referee (see the module); the first divergence
    names the first layer and backend that part, else says that the quantisation
    itself is over budget."""
    backends = list(q.runs)
    layers = [n for n in q.runs[q.anchor] if all(n in run for run in q.runs.values())]
    roundings = layer_roundings(layers, q.layer_facts)
    judgements = [
        judge_across(n, {b: q.runs[b][n] for b in backends}, q.anchor, ceiling, roundings[n])
        for n in layers
    ]
    output = q.output
    budgets = budgets_for(keras_kind(q.mode))
    budget = budgets.tensor_budget()
    logits = is_logits(q.runs[q.anchor][output], q.vocabulary)
    limits, origin = budgets.kl_limits(kl_budget) if logits else (None, "")
    truth = None if q.float_truth is None else q.float_truth.get(output)
    judged = [
        judge_one(b, FLOAT, run[output], truth, budget, limits)
        for b, run in q.runs.items()
        if truth is not None
    ]
    across = [c for j in judgements for c in j.comparisons.values()]
    over = [f for j in judged for f in j.failures]
    report = Report(check="backends", model=q.model, passed=True, notes=list(q.notes))
    if q.float_truth is not None and truth is None:
        report.notes.append(f"the float model records no {output}: the budget is not judged")
    report.comparisons = across + [j.comparison for j in judged]
    report.comparisons += [f for j in judged for f in j.failures if f is not j.comparison]
    report.passed = all(c.passed for c in across) and not over
    first = next((j for j in judgements if j.failing), None)
    facts = parting(first, backends, q.anchor) if first is not None else None
    if facts is not None:
        facts["hints"] = layer_hints(
            first.layer, facts["backends"], q.layer_facts, q.precision, facts["kind"] == "all"
        )
    elif over:
        facts = {"text": _budget_text(q, output, judged)}
    report.details = {
        # the second shape of a ``backends`` report, declared: its renderer is registered
        # as ``backends:quantised`` (tfparity/report/__init__.py)
        "variant": "quantised",
        "backends": backends,
        "referee": {"backend": q.referee_backend, "dtype": "float64", "of": "the float model"}
        if q.float_truth is not None
        else None,
        "judge": "the backends against each other on the same quantised model: each "
        f"backend's RMSE to the nearest other's <= ceiling {ceiling:g} x RMS (the float "
        "cross-backend ceiling)" + _half(set(roundings.values()), ceiling),
        "ceiling": ceiling,
        "layers": [layer_row(j, q.parents.get(j.layer)) for j in judgements],
        "dtype_policies": layer_policies(q.layer_facts),
        "quantisation": {
            "mode": q.mode,
            "quantised": "here, on TensorFlow (Keras model.quantize)"
            if q.quantised_here
            else "in the file (read as it is)",
            "output": output,
            "logits": logits,
            "anchor": q.anchor,
            "budget": f"{keras_kind(q.mode)}: {budget.text()}"
            + (f"; distribution {', '.join(map(str, limits))} ({origin})" if limits else ""),
            "judged": [j.row() for j in judged],
        },
        "precision": dict(q.precision),
        "first_divergence": facts,
    }
    if facts is not None:
        layer = facts.get("layer", output)
        report.first_divergence = Divergence(None, layer, None, hint=facts["text"])
    return report


def _half(roundings: set[str], ceiling: float) -> str:
    """The ceilings of half-precision layers, where there are any."""
    half = sorted(roundings & {"float16", "bfloat16"})
    parts = [f"{d} layers {widened(0.0, ceiling, d)[1]:.2g}" for d in half]
    return f"; in units of their rounding, {', '.join(parts)}" if parts else ""


def _budget_text(q: QuantisedOutputs, output: str, judged: Sequence[Judged]) -> str:
    """The backends agree; some or all are over the mode's budget against the float
    model: every one is the quantisation's own error, some only a backend's."""
    over = [j.backend for j in judged if j.failures]
    if len(over) == len(judged):
        return (
            f"every backend agrees on the quantised model, and all of them part from the "
            f"float model's float64 referee at its output ({output}): the {q.mode} "
            "quantisation itself is over budget"
        )
    return (
        f"backend {', '.join(over)} is over the {q.mode} budget against the float model's "
        f"float64 referee at its output ({output}) while the others are within it"
    )
