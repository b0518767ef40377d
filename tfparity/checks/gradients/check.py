"""The gradients check: gradients through ``inputs_embeds`` and against PyTorch.

Pipelines that work through ``inputs_embeds`` (integrated gradients, adversarial
training, soft prompts) depend on its gradients, which no forward comparison sees: a
gather that stops or scales the gradient leaves every output intact. The scalar
(:mod:`tfparity.adapters.interfaces.gradients`: the head's loss on seeded labels, or a seeded
projection of a base model's last hidden state) is differentiated with respect to the
embeddings, every hidden state and every weight, and compared twice:

- **ids vs embeds** (``gradients-embeds``): the TF ``input_ids`` path against the
  ``inputs_embeds`` path fed the Keras-side gather; the gradient that reaches the
  word-embedding matrix through the gather must equal the ids path's (TF's
  ``IndexedSlices`` densified), judged by a tolerance as the embeds check judges;
- **TF vs PyTorch** (``gradients``): judged by the float64 PyTorch referee.

Localisation walks *backwards*: the first hidden state, from the top, whose gradient
diverges while the one above it agrees names the layer whose backward pass differs.
A forward divergence changes every gradient below the scalar, so where the forward
pass already parts (the same runs hold it) that layer is named instead. Either way the
weights whose gradients differ most are listed with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...adapters.interfaces.gradients import GradientRun, Objective
from ...adapters.interfaces.sides import Reference, TFSide
from ...compare import (
    Comparison,
    Judge,
    Tolerance,
    ToleranceJudge,
    compare_batches,
    factor_text,
    failed_comparison,
    rmse,
)
from ...errors import TfparityError
from ...inputs import Batch, note_inputs
from ...results import Divergence, Report
from ...trace import hidden_state_index
from ...validation import same_architecture
from ..embeds import NonFiniteOutputError, embeddings_hint
from .frozen import excluded_note, excluded_weights
from .localise import GRAD, failed, hidden_agree, hidden_table, localise, weight_table
from .options import GradientsOptions


@dataclass
class Collected:
    """One side's runs over the batches: per batch where a gradient has a batch axis,
    summed over batches for the weights (the gradient of the summed scalar)."""

    losses: list[float] = field(default_factory=list)
    forward: list[dict[str, np.ndarray]] = field(default_factory=list)
    hidden: list[dict[str, np.ndarray | None]] = field(default_factory=list)
    embeds: list[np.ndarray | None] = field(default_factory=list)
    weights: dict[str, np.ndarray | None] = field(default_factory=dict)
    word: str | None = None
    scalar: str = ""
    frozen_rows: dict[str, int] = field(default_factory=dict)

    def add(self, run: GradientRun) -> None:
        self.losses.append(run.loss)
        self.scalar = run.scalar
        self.frozen_rows = run.frozen_rows
        self.forward.append(run.forward)
        self.hidden.append(run.hidden)
        self.embeds.append(run.inputs_embeds)
        self.word = run.word_embeddings
        for name, grad in run.weights.items():
            total = self.weights.get(name)
            self.weights[name] = (
                grad if total is None else (total if grad is None else total + grad)
            )


def collect(batches: Sequence[Batch], seed: int, run: Callable[[Batch, Objective], GradientRun]):
    """``run`` on every batch with the batch's seeded objective, collected."""
    collected = Collected()
    for i, batch in enumerate(batches):
        collected.add(run(batch, Objective(seed, i)))
    return collected


def check_gradients(
    tf_model: TFSide,
    pt_model: Reference | None,
    batches: Sequence[Batch],
    options: GradientsOptions = GradientsOptions(),
) -> list[Report]:
    """The ids-vs-embeds report and, with ``pt_model``, the TF-vs-PyTorch report."""
    if tf_model.quantisation is not None:  # int8/int4 kernels are constants to a tape
        raise TfparityError(
            f"{tf_model.name} is quantised ({tf_model.quantisation}): its quantised weights "
            "are not trainable, so it has no weight gradients to compare; check the float "
            "model's gradients, and the quantised one with `tfparity crosscheck`."
        )
    if pt_model is not None:
        if pt_model.gradients_refusal():  # stored outputs cannot be differentiated
            raise TfparityError(pt_model.gradients_refusal() or "")
        same_architecture(tf_model, pt_model)
    reference = pt_model.weights() if pt_model is not None else None
    excluded = excluded_weights(options.frozen, reference)  # refused before any run
    no_embeds = _embeds_refusal(tf_model, pt_model)  # exit 2 before any run
    ids = collect(batches, options.seed, lambda b, o: tf_model.gradients(b, o, reference=reference))
    embeds = None
    if no_embeds is None:
        embeds = collect(
            batches,
            options.seed,
            lambda b, o: tf_model.gradients(
                b, o, embeds=True, embeds_fn=options.embeds_fn, reference=reference
            ),
        )
    reports = [] if embeds is None else [_ids_vs_embeds(tf_model, ids, embeds, batches, options)]
    if pt_model is not None:
        pt = collect(batches, options.seed, lambda b, o: pt_model.gradients(b, o))
        truth = collect(batches, options.seed, lambda b, o: pt_model.gradients(b, o, float64=True))
        sides = _Sides(ids, embeds, pt, truth)
        reports.append(_tf_vs_pt(tf_model, pt_model, sides, batches, options, excluded))
    return [note_inputs(r, batches) for r in reports]


def _embeds_refusal(tf_model: TFSide, pt_model: Reference | None) -> str | None:
    """Why the ids-vs-embeds half cannot run on this side (a keras-hub model on another
    Keras backend is given token ids only), or None. The TF-vs-PyTorch half still runs
    (a note says what was left out); with no reference nothing would: exit 2."""
    reason = tf_model.inputs_embeds_reason
    if reason is not None and pt_model is None:
        raise TfparityError(
            f"The gradients check has nothing to run: {reason}, so there is no "
            "inputs_embeds path to compare with the input_ids path, and without PyTorch "
            "(--no-pt) there is no TF-vs-PyTorch report either: drop --no-pt."
        )
    return reason


# ----------------------------------------------------------------------------- ids vs embeds


def _ids_vs_embeds(
    tf_model: Any,
    ids: Collected,
    embeds: Collected,
    batches: Sequence[Batch],
    options: GradientsOptions,
) -> Report:
    masks = [b.attention_mask for b in batches]
    tol = options.tolerance
    same_path = ToleranceJudge(tol, check_dtype=False)  # the forward values, as the embeds check
    forward = _forward_failures(embeds.forward, ids.forward, masks, same_path)
    judge = ToleranceJudge(tol)
    rows = [judge.judge("loss", [np.asarray(embeds.losses)], [np.asarray(ids.losses)])]
    rows += _hidden_rows(embeds.hidden, ids.hidden, masks, judge, None)
    word = ids.word
    # a matrix TF does not train gets no gradient on either path: nothing to compare
    untrained = word is not None and all(x.weights.get(word) is None for x in (ids, embeds))
    if not untrained:
        rows.append(
            _weight_row(
                word, embeds.weights.get(word), ids.weights.get(word), tol, "inputs_embeds path"
            )
        )
    passed = all(c.passed for c in rows)
    divergence = None
    if not passed:
        divergence = localise(rows, forward, tf_model, None, "inputs_embeds path", "input_ids path")
        if forward and min(forward) == 0:  # the embeds check's own finding, in its words
            hint = "The forward pass already differs at hidden_states[0]. "
            hint += embeddings_hint(tf_model, batches)
            divergence = Divergence(0, "embeddings", "embeddings", hint)
        if failed(rows, GRAD + str(word)) and not forward and hidden_agree(rows):
            divergence = Divergence(None, "embeddings", "embeddings", _gather_hint(rows, word))
    return Report(
        check="gradients-embeds",
        model=tf_model.name,
        passed=passed,
        comparisons=rows,
        first_divergence=divergence,
        details={
            "compares": "gradients on the inputs_embeds path (the Keras-side gather inside "
            "the tape) vs the input_ids path",
            "scalar": ids.scalar,
            "judge": "tolerance",
            "batches": len(batches),
            "word_embeddings": word,
            "hidden_states": hidden_table(rows, forward),
        },
        notes=list(tf_model.notes) + ([_untrained_word_note(word)] if untrained else []),
    )


def _untrained_word_note(word: str | None) -> str:
    return (
        f"The word-embedding matrix {word} gets no gradient on either TF path (not "
        "trainable in TF), so its row is not compared here; the gradients report judges "
        "it against PyTorch's."
    )


def _gather_hint(rows: list[Comparison], word: str | None) -> str:
    """What the gather did to the matrix's gradient (stopped, scaled, other)."""
    row = next(c for c in rows if c.name == GRAD + str(word))
    return (
        "Every hidden state's gradient agrees, but the gradient reaching the word-embedding "
        f"matrix {word} through the inputs_embeds path {row.problem or 'differs'}: the "
        "embeddings fed in are cut from the matrix (tf.stop_gradient, a numpy copy) or their "
        "gradient is rescaled on the way back (a tf.custom_gradient in the embeds function). "
        "Gather inside the tape: tf.gather(model.get_input_embeddings().weight, input_ids)."
    )


# ----------------------------------------------------------------------------- TF vs PyTorch


@dataclass
class _Sides:
    """The four runs the TF-vs-PyTorch report judges: TF's two paths, PyTorch, and
    PyTorch in float64."""

    ids: Collected
    embeds: Collected | None  # None: the side has no inputs_embeds path
    pt: Collected
    truth: Collected


def _tf_vs_pt(
    tf_model: Any,
    pt_model: Any,
    sides: _Sides,
    batches: Sequence[Batch],
    options: GradientsOptions,
    excluded: list[str],
) -> Report:
    ids, embeds, pt, truth = sides.ids, sides.embeds, sides.pt, sides.truth
    masks = [b.attention_mask for b in batches]
    _ensure_finite(pt, "PyTorch")
    _ensure_finite(truth, "PyTorch's float64 referee", float32_finite=True)
    judge: Judge = options.referee
    if options.tolerance is not None:
        judge = ToleranceJudge(options.tolerance, check_dtype=False)
    forward = _forward_failures(ids.forward, pt.forward, masks, judge, truth.forward)
    losses = [[np.asarray(x.losses)] for x in (ids, pt, truth)]
    slack = _slack(float(np.max(np.abs(losses[2][0]))))
    rows = [judge.judge("loss", losses[0], losses[1], truth=losses[2], slack=slack)]
    no_path = embeds is None
    same_path = ToleranceJudge(check_dtype=False)
    embeds_skipped = no_path or bool(
        _forward_failures(embeds.forward, ids.forward, masks, same_path)
    )
    rows += [] if embeds_skipped else _embeds_row(embeds, pt, truth, masks, judge)
    rows += _hidden_rows(ids.hidden, pt.hidden, masks, judge, truth.hidden)
    frozen = _frozen_notes(ids.weights, pt.frozen_rows)
    judged = {k: v for k, v in pt.weights.items() if k not in excluded}
    weights, unreached = _weight_rows(ids.weights, judged, truth.weights, judge, pt.frozen_rows)
    rows += weights
    passed = all(c.passed for c in rows)
    divergence = None if passed else localise(rows, forward, tf_model, pt_model, "TF", "PyTorch")
    notes = list(tf_model.notes) + list(pt_model.notes) + frozen
    if excluded:
        notes.append(excluded_note(options.frozen, excluded))
    if no_path:
        notes.append(
            f"Only the TF-vs-PyTorch half ran: {tf_model.inputs_embeds_reason}, so the "
            "ids-vs-embeds report (gradients-embeds) and the inputs_embeds gradient are "
            "left out."
        )
    elif embeds_skipped:
        notes.append(
            "The inputs_embeds gradient is not compared with PyTorch: TF's inputs_embeds "
            "path already differs from its input_ids path in the forward pass (see the "
            "gradients-embeds report), and PyTorch runs the input_ids path."
        )
    if unreached:
        notes.append(
            f"{len(unreached)} weight(s) get no gradient on either side (not on the scalar's "
            f"path): {', '.join(unreached[:6])}{' ...' if len(unreached) > 6 else ''}."
        )
    notes += _unreachable_hidden_notes(ids.hidden, pt.hidden) + _untrained_notes(rows)
    return Report(
        check="gradients",
        model=tf_model.name,
        passed=passed,
        comparisons=rows,
        first_divergence=divergence,
        details={
            "compares": f"{tf_model.framework} (actual) vs PyTorch (expected) gradients, "
            "same weights and inputs",
            "scalar": ids.scalar,
            "judge": judge.describe(),
            "reference": pt_model.name,
            "batches": len(batches),
            "hidden_states": hidden_table(rows, forward),
            "weights": weight_table(rows, ids.weights, pt.weights),
            "excluded_weights": excluded,
        },
        notes=notes,
    )


def _ensure_finite(side: Collected, where: str, float32_finite: bool = False) -> None:
    """Refuse (exit 2) to judge against a reference whose loss or gradients hold NaN or
    Inf (e.g. a fully masked row's softmax under left padding); ``float32_finite``: the
    float32 run on the same inputs was finite, so the inputs are not the cause."""
    grads = [g for h in side.hidden for g in h.values()] + side.embeds
    bad = not np.all(np.isfinite(side.losses)) or any(
        g is not None and not np.all(np.isfinite(g)) for g in grads
    )
    if bad and float32_finite:
        raise NonFiniteOutputError(
            f"The loss or gradients of {where} hold NaN or Inf where PyTorch's float32 run "
            "on the same inputs is finite: the model's PyTorch code does not differentiate "
            "in float64 (Longformer's sliding-window attention over padded positions, for "
            "one), so there is no referee to judge the gradients by."
        )
    if bad:
        raise NonFiniteOutputError(
            f"The loss or gradients of {where} hold NaN or Inf, so gradient parity cannot be "
            "judged. A row whose every token is masked (left padding in a causal model) gives "
            "NaN gradients in some models; pad on the right, or check the weights."
        )


# Allowed beyond the referee's bound, in units of float32's epsilon: a single number
# (the loss: PyTorch's own rounding of one sum is as likely tiny as not), and a weight
# whose gradient is zero in exact arithmetic (a query's, with one token to attend to),
# against the scale of all weights' gradients.
EPSILONS = 8.0


def _slack(scale: float) -> float:
    """The room beyond the referee's bound for a lone number of magnitude ``scale``."""
    return EPSILONS * float(np.finfo(np.float32).eps) * scale


def _embeds_row(
    embeds: Collected, pt: Collected, truth: Collected, masks: list, judge: Judge
) -> list[Comparison]:
    if any(x is None for x in embeds.embeds + pt.embeds + truth.embeds):
        return []
    name = GRAD + "inputs_embeds"
    return [judge.judge(name, embeds.embeds, pt.embeds, masks=masks, truth=truth.embeds)]


def _hidden_rows(
    actual: list, expected: list, masks: list, judge: Judge, truth: list | None
) -> list[Comparison]:
    """One row per hidden state whose gradient both sides give (a TF model that returns
    a reshaped copy of a hidden state has none for it: see the note)."""
    rows = []
    for name in expected[0]:
        if any(a.get(name) is None for a in actual) or any(e.get(name) is None for e in expected):
            continue
        a, e = [x[name] for x in actual], [x[name] for x in expected]
        t = [x[name] for x in truth] if truth is not None else None
        rows.append(judge.judge(GRAD + name, a, e, masks=masks, truth=t))
    return rows


def _unreachable_hidden_notes(actual: list, expected: list) -> list[str]:
    missing = [
        n
        for n in expected[0]
        if any(a.get(n) is None for a in actual) and expected[0][n] is not None
    ]
    if not missing:
        return []
    return [
        f"The TF model returns {', '.join(missing)} as a copy the rest of the model does not "
        "use (a reshape), so no gradient reaches it there: those hidden states' gradients are "
        "not compared, and the walk backwards skips them."
    ]


def _weight_rows(
    actual: dict, expected: dict, truth: dict, judge: Judge, frozen: dict[str, int]
) -> tuple[list[Comparison], list[str]]:
    rows, unreached = [], []
    slack = _slack(max((_rms([t]) for t in truth.values()), default=0.0))  # largest gradients'
    for name, e in expected.items():
        if name not in actual and e is not None and np.any(e):
            rows.append(_not_differentiated(name, e))
            continue
        a, t = actual.get(name), truth.get(name)
        if name in frozen and a is not None:  # left out on every side: a tied LM head
            a = _without_row(a.reshape(e.shape) if e is not None else a, frozen[name])
            e, t = (None if x is None else _without_row(x, frozen[name]) for x in (e, t))
        if a is None and e is None:
            unreached.append(name)
            continue
        if a is None or e is None:
            rows.append(_one_sided(name, a, e))
            continue
        a = a.reshape(e.shape) if a.shape != e.shape and a.size == e.size else a
        a, e, t = _touched_rows(a, e, t)
        truth_of = None if t is None else [t]
        rows.append(judge.judge(GRAD + name, [a], [e], truth=truth_of, slack=slack))
    return rows, unreached


UNTRAINED = "PyTorch differentiates it, TF has no gradient for it (not trainable in TF?)"


def _untrained_notes(rows: list[Comparison]) -> list[str]:
    """What to do about weights TF does not train: once, not on every row."""
    names = [c.name.removeprefix(GRAD) for c in rows if c.problem == UNTRAINED]
    if not names:
        return []
    return [
        f"{len(names)} weight(s) PyTorch differentiates get no TF gradient (trainable=False, "
        "a non-trainable variable or a constant in the port): fine-tuning the port would "
        "leave them where PyTorch moves them. If the port freezes them on purpose, name them "
        "with --frozen PATTERN (frozen= in Python)."
    ]


def _not_differentiated(name: str, expected: np.ndarray) -> Comparison:
    """A weight PyTorch differentiates and TF does not: not among TF's trainable
    variables (``trainable=False``, a constant). Training would move it in PyTorch only,
    so it fails unless the port freezes it on purpose (``--frozen``)."""
    return failed_comparison(
        GRAD + name,
        UNTRAINED,
        list(expected.shape),
        str(expected.dtype),
    )


def _touched_rows(a: np.ndarray, e: np.ndarray, t: np.ndarray | None) -> tuple:
    """The rows (first axis) that are non-zero on some side: an embedding table's
    gradient is zero in every row no token reaches, on every side, and those rows agree
    by construction (comparing them costs most of a word matrix's time, for nothing)."""
    if a.ndim < 2 or a.shape != e.shape:
        return a, e, t
    sides = [a, e] if t is None else [a, e, t]
    kept = np.zeros(a.shape[0], bool)
    for x in sides:
        kept |= np.any(x.reshape(x.shape[0], -1) != 0, axis=1)
    if kept.all() or not kept.any():
        return a, e, t
    return a[kept], e[kept], None if t is None else t[kept]


def _without_row(grad: np.ndarray, row: int) -> np.ndarray:
    kept = grad.copy()
    kept[row] = 0
    return kept


def _frozen_notes(tf_weights: dict, frozen: dict[str, int]) -> list[str]:
    """Say where PyTorch's ``padding_idx`` row is left out, and what TF gives it."""
    notes = []
    for name, row in frozen.items():
        grad = tf_weights.get(name)
        if grad is None or not np.any(grad[row]):
            continue
        notes.append(
            f"PyTorch's {name} is an nn.Embedding with padding_idx={row}, whose row gets no "
            "gradient; TensorFlow's gather gives it one "
            f"(max |g| {np.max(np.abs(grad[row])):.3g}): "
            "training updates that row in TF only. The row is left out of the comparison."
        )
    return notes


def _rms(arrays: Any) -> float:
    """The RMS over every element of ``arrays`` (None entries skipped), in float64."""
    total, count = 0.0, 0
    for x in arrays:
        if x is not None:
            total += float(np.sum(np.square(x, dtype=np.float64)))
            count += x.size
    return float(np.sqrt(total / count)) if count else 0.0


def _weight_row(
    name: str | None, actual: Any, expected: Any, tol: Tolerance | None, side: str
) -> Comparison:
    if actual is None or expected is None:
        return _one_sided(str(name), actual, expected, side)
    actual, expected, _ = _touched_rows(actual, expected, None)
    c = compare_batches([actual], [expected], name=GRAD + str(name), tolerance=tol)
    if not c.passed and not c.problem:
        c.problem = _relation(actual, expected)
    return c


def _one_sided(name: str, actual: Any, expected: Any, side: str = "TF") -> Comparison:
    """A gradient one side gives and the other does not (None: not on its path); an
    all-zero gradient against none agrees."""
    given = actual if actual is not None else expected
    if not np.any(given):
        return compare_batches([np.zeros_like(given)], [np.zeros_like(given)], name=GRAD + name)
    where = side if actual is None else "the reference"
    return failed_comparison(
        GRAD + name,
        f"is none at all on the {where} (the gradient is stopped: tf.stop_gradient, or a "
        "value with no gradient path)",
        list(given.shape),
        str(given.dtype),
    )


def _relation(actual: np.ndarray, expected: np.ndarray) -> str:
    """How ``actual`` relates to ``expected``: zero, a scale of it, or neither."""
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    ee = float(e @ e)
    if not np.any(a):
        return "is all zeros (the gradient is stopped)"  # a stop inside a tied model
    if ee == 0:
        return "is non-zero where the reference's is zero"
    scale = float(a @ e) / ee
    if rmse(a, scale * e) <= 1e-3 * np.sqrt(ee / e.size):
        return f"is the reference's scaled by {factor_text(scale)}"
    return "differs from the reference's (not a scale of it)"


# ----------------------------------------------------------------------------- localisation


def _forward_failures(
    actual: list, expected: list, masks: list, judge: Judge, truth: list | None = None
) -> list[int]:
    """The hidden states whose forward values already differ, by index."""
    failing = []
    for name in expected[0]:
        a, e = [x[name] for x in actual], [x[name] for x in expected]
        t = [x[name] for x in truth] if truth is not None else None
        if not judge.judge(name, a, e, masks=masks, truth=t).passed:
            failing.append(hidden_state_index(name))
    return failing
