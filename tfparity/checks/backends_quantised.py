"""``tfparity backends --quantize``: do the backends compute the same quantised model?

Keras quantises once, on TensorFlow, and every backend loads that one quantised
``.keras`` (:mod:`tfparity.cross_backend.quantised`). Keras cannot run a quantised
model at float64 (its int8 kernels and scales are not a float model's weights, so no
float64 twin can be built), and a quantised model differs from float by design, so
neither the float64 referee nor the cross-backend rule of :mod:`.backends` judges it.
Instead each backend's final output is judged, by the mode's budgets
(:mod:`tfparity.compare.budgets` per tensor, and where the output is logits over the
model's vocabulary the distribution budget of :mod:`tfparity.compare.quantisation`,
by a bootstrap over rows), against:

- the anchor's quantised run (TensorFlow's, where it runs): a backend that parts from it
  computes another quantised model;
- the float model's float64 referee (absent for a file already quantised: there is no
  float model): the quantisation's own error, shared by every backend.

Numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..compare import Comparison
from ..compare.bootstrap import FAIL, BootstrapVerdict, Limit, bootstrap_verdict
from ..compare.budgets import Budget, budget_for, judged_by_budget
from ..compare.distribution import position_metrics, summarise
from ..compare.quantisation import kl_budget_for
from ..compare.record import failed_comparison
from ..compare.stats import compare_batches
from ..results import Divergence, Report

FLOAT = "float64 referee"


@dataclass(frozen=True)
class QuantisedOutputs:
    """Each backend's final output of the quantised model (``layer``), the backend the
    others are held to (``anchor``), and the float model's float64 final output (None
    for a file already quantised). ``vocabulary``: the smallest Embedding's input size,
    which makes a final output of that width logits."""

    model: str
    mode: str
    layer: str
    runs: Mapping[str, np.ndarray]
    anchor: str
    float_truth: np.ndarray | None
    referee_backend: str
    vocabulary: int | None = None
    quantised_here: bool = True
    precision: Mapping[str, Any] = field(default_factory=dict)
    notes: Sequence[str] = ()


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
        terms = self.verdict.terms if self.verdict is not None else []
        return found + [
            failed_comparison(
                f"{self.backend}: distribution {t.limit.metric} vs {self.against}",
                f"Over budget: {t.limit.metric} {t.value:.3g} outside {t.limit}, its 95% "
                f"interval [{t.low:.3g}, {t.high:.3g}] wholly outside.",
                [self.verdict.items],
                "float64",
            )
            for t in terms
            if t.verdict == FAIL
        ]

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
    c = compare_batches([actual], [expected], name=f"{backend} vs {against}", check_dtype=False)
    c = judged_by_budget(c, budget)
    if not limits or np.shape(actual) != np.shape(expected):
        return Judged(backend, against, c)
    metrics = position_metrics(expected, actual)
    verdict = bootstrap_verdict(metrics, limits)
    stats = asdict(summarise(metrics)) | {"budget_verdict": verdict.verdict}
    stats["needed"] = verdict.needed  # too few rows for an interval: how many to give
    stats["budget"] = [asdict(t) for t in verdict.terms]
    return Judged(backend, against, c, stats, verdict)


def check_quantised_backends(
    q: QuantisedOutputs, kl_budget: Sequence[Limit] | None = None
) -> Report:
    """Every backend's quantised output against the anchor's and the float referee's;
    the first divergence names a backend that parts from the anchor, or says that the
    quantisation itself is over budget on every backend."""
    budget = budget_for(f"keras {q.mode}")
    logits = is_logits(q.runs[q.anchor], q.vocabulary)
    limits, origin = kl_budget_for(q.mode, kl_budget) if logits else (None, "")
    judged = [
        judge_one(b, f"{q.anchor} (quantised)", a, q.runs[q.anchor], budget, limits)
        for b, a in q.runs.items()
        if b != q.anchor
    ]
    if q.float_truth is not None:
        judged += [judge_one(b, FLOAT, a, q.float_truth, budget, limits) for b, a in q.runs.items()]
    comparisons = [f for j in judged for f in j.failures]
    report = Report(check="backends", model=q.model, passed=not comparisons, notes=list(q.notes))
    report.comparisons = [j.comparison for j in judged] + comparisons
    text = _divergence_text(q, judged)
    report.details = {
        "backends": list(q.runs),
        "referee": {"backend": q.referee_backend, "dtype": "float64", "of": "the float model"}
        if q.float_truth is not None
        else None,
        "judge": f"budgets of keras {q.mode}: {budget.text()}"
        + (f"; distribution {', '.join(map(str, limits))} ({origin})" if limits else ""),
        "quantisation": {
            "mode": q.mode,
            "quantised": "here, on TensorFlow (Keras model.quantize)"
            if q.quantised_here
            else "in the file (read as it is)",
            "output": q.layer,
            "logits": logits,
            "anchor": q.anchor,
            "judged": [j.row() for j in judged],
        },
        "precision": dict(q.precision),
        "first_divergence": {"text": text} if text else None,
    }
    if text:
        report.first_divergence = Divergence(None, q.layer, None, hint=text)
    return report


def _divergence_text(q: QuantisedOutputs, judged: Sequence[Judged]) -> str:
    """Who parts: backends that fail against the anchor are named; a failure against
    the float model on every backend (none parting) is the quantisation's own."""
    parting = [j.backend for j in judged if j.against != FLOAT and j.failures]
    if parting:
        return (
            f"backend {', '.join(parting)} parts from {q.anchor}'s run of the same "
            f"quantised model at its output (layer {q.layer}): it computes another "
            "quantised model (a backend-specific kernel or layer)"
        )
    over = [j.backend for j in judged if j.against == FLOAT and j.failures]
    if over and len(over) == len(q.runs):
        return (
            f"every backend agrees on the quantised model, and all of them part from the "
            f"float model's float64 referee at its output (layer {q.layer}): the {q.mode} "
            "quantisation itself is over budget"
        )
    if over:
        return (
            f"backend {', '.join(over)} parts from the float model's float64 referee at its "
            f"output (layer {q.layer}) while staying within budget of {q.anchor}'s run"
        )
    return ""
