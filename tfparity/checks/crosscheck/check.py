"""The PyTorch cross-check: a TF model against PyTorch on the same weights.

Every output and hidden state is compared. By default a float64 PyTorch run referees
(see :class:`tfparity.compare.Referee`) instead of a fixed threshold; explicit
``atol``/``rtol`` are the other mode. Where the architecture describes its sub-layers
(:mod:`tfparity.architectures`), taps and isolated runs localise the first divergence
to a layer and a component; elsewhere to the layer. Hints name a likely cause with
evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ... import validation
from ...adapters.interfaces.sides import Reference, TFSide
from ...architectures import tapped_types
from ...architectures.heads import LABELLED_HEADS, LM_HEADS, Head
from ...compare import (
    BudgetJudge,
    Comparison,
    Judge,
    Referee,
    RefereeResult,
    RefereeSums,
    Tolerance,
    ToleranceJudge,
    compare_output_batches,
)
from ...compare.bootstrap import Limit, parse_limits
from ...compare.budgets import budgets_for
from ...errors import TfparityError
from ...inputs import Batch, note_inputs
from ...results import Divergence, Report
from ...trace import Trace, hidden_state_index
from ...validation import nonfinite_weights, same_architecture
from .. import DEFAULT_LOCALISE, DEFAULT_REFEREE_RUNS, LOCALISE_MODES, REFEREE_RUNS
from . import budgeted, distribution
from .agreement import task_agreement
from .artefacts import Findings, label_findings, with_findings
from .checkpoints import (
    checkpoint_gaps,
    gap_failures,
    gap_notes,
    is_judged,
    judged,
    name_lacking,
)
from .gold import check_labels, gold_agreement
from .localisation import component_row, components_of, layer_rows, localise
from .runs import Float64Runs, Runs, run_all
from .variation import run_to_run


@dataclass(frozen=True)
class CrosscheckOptions:
    """``tolerance`` set: judge by atol/rtol; None: judge by the float64 referee."""

    tolerance: Tolerance | None = None
    referee: Referee = Referee()
    label: str = "crosscheck"
    # one of LOCALISE_MODES (tfparity/checks/__init__.py): when the sub-layer taps run
    localise: str = DEFAULT_LOCALISE
    # A Budget or "max=1e-2,mean=1e-3,...": judge by it (a quantised side always is, by
    # its kind's default when this is None; see tfparity/checks/budgeted.py).
    budget: Any = None
    # one of REFEREE_RUNS: "lazy" runs float64 only until the batches left cannot
    # change a verdict (the verdicts are those of "full", which runs every batch)
    referee_runs: str = DEFAULT_REFEREE_RUNS
    # Limits on the LM head's distribution metrics (``--kl-budget``), judged by a
    # bootstrap interval over sequences (tfparity/checks/distribution.py); None: reported
    # only, the verdict left to the judge above.
    kl_budget: Sequence[Limit] | None = None
    # Gold labels, one per text (``--labels``): each side's accuracy and the flips
    # between them are reported (tfparity/checks/crosscheck/gold.py); None: none given.
    labels: Sequence[str] | None = None

    @classmethod
    def from_arguments(
        cls,
        *,
        tolerance: Tolerance | None = None,
        localise: str = DEFAULT_LOCALISE,
        referee: str = DEFAULT_REFEREE_RUNS,
        budget: Any = None,
        kl_budget: str | None = None,
        labels: Sequence[Any] | None = None,
        quantize: str | None = None,
        attribute: bool = False,
        backend: str | None = None,
    ) -> CrosscheckOptions:
        """The options :func:`tfparity.crosscheck` and ``tfparity crosscheck`` were
        given, checked once for both before any framework import (exit 2 for a bad
        one): the modes, ``budget`` and ``kl_budget`` parsed (a malformed one refused
        before any model loads), a ``quantize`` request (with ``attribute``) that this
        process can run. ``kl_budget`` is kept parsed here; with ``quantize`` the
        caller hands it to the quantisation's judge instead (its own budget)."""
        validation.tolerance(tolerance)
        validation.one_of(localise, LOCALISE_MODES, "localise")
        validation.one_of(referee, REFEREE_RUNS, "referee")
        if isinstance(budget, str):
            budgets_for(None).tensor_budget(budget)
        limits = parse_limits(kl_budget) if kl_budget is not None else None
        if quantize is not None or attribute:
            from ...adapters.tf_common.quantize import check_request

            check_request(quantize, attribute)
        if quantize is not None and backend not in (None, "tensorflow"):
            raise TfparityError(
                f"--quantize is not run with --backend {backend} yet: the keras-hub "
                "model on another backend runs in a process of its own (use --backend "
                "tensorflow)."
            )
        return cls(
            tolerance=tolerance,
            localise=localise,
            budget=budget,
            referee_runs=referee,
            kl_budget=limits,
            labels=None if labels is None else tuple(str(x) for x in labels),
        )


def crosscheck(
    tf_model: TFSide,
    pt_model: Reference,
    batches: Sequence[Batch],
    options: CrosscheckOptions = CrosscheckOptions(),
    tf_traces: Sequence[Trace] | None = None,
) -> Report:
    """``tf_traces``: the TF model's ``input_ids`` runs of ``batches`` when the caller
    already has them (``tfparity check`` shares the embeds check's)."""
    same_architecture(tf_model, pt_model)
    if options.labels is not None:
        id2label = getattr(tf_model.config, "id2label", None)
        check_labels(tf_model.head, batches, options.labels, id2label)  # exit 2 before runs
    # what the checkpoints hold decides what is judged (exit 2 for what cannot be)
    gaps = checkpoint_gaps(tf_model.holdings, pt_model.holdings)
    budget = budgeted.budget_of(tf_model.quantisation, options.budget)
    if budget is not None:
        return _budgeted(tf_model, pt_model, batches, options, budget, tf_traces)
    tapped = tf_model.localisable() and pt_model.localisable()
    float64 = Float64Runs(options.referee_runs, options.referee, lambda n: is_judged(n, gaps))
    always = tapped and options.localise == "always"
    runs = run_all(tf_model, pt_model, batches, always, tf_traces, float64)
    masks = [b.attention_mask for b in batches]
    tf_judged, pt_judged = ([judged(t, gaps) for t in side] for side in (runs.tf, runs.pt))
    dropped = [n for n in runs.tf[0] if n not in tf_judged[0]] if runs.tf else []
    judge: Judge = options.referee
    if options.tolerance is not None:
        judge = ToleranceJudge(options.tolerance, check_dtype=False)
    comparisons = compare_output_batches(
        tf_judged, pt_judged, masks=masks, compare=_judging(runs, judge)
    )
    # the float64 verdicts, reported under a tolerance too
    sums = {c.name: s for c in comparisons if (s := _float64_sums(runs, c.name)) is not None}
    refereed = {n: r for n, s in sums.items() if (r := options.referee.result(n, s)) is not None}
    referees = [refereed.get(c.name) for c in comparisons]
    passed = all(c.passed for c in comparisons)
    broken = gap_failures(gaps) + nonfinite_weights(tf_model.named_weights(), "TF")
    broken += nonfinite_weights(pt_model.named_weights(), "PyTorch")
    if tapped and not passed and not runs.tf_taps:
        runs = run_all(tf_model, pt_model, batches, True)  # again, with taps, to localise
    components = components_of(runs, masks, options.referee) if runs.tf_taps else []
    labels = _labels(tf_model, pt_model)
    disagrees = ("num_labels",) if labels.num_labels_problem() else ()
    # one more TF run on the first batch, only on a failure: outputs that change from run
    # to run (dropout at inference) are the cause, whatever else the hints would fit
    varies = None if passed or not runs.tf else run_to_run(tf_model, batches[0], runs.tf[0])
    divergence = (
        None
        if passed
        else localise(tf_model, pt_model, comparisons, components, runs, disagrees, varies)
    )
    name_lacking(divergence, gaps)
    _name_num_labels(divergence, labels)
    agreement = task_agreement(
        tf_judged,
        pt_judged,
        masks,
        language_model=tf_model.head in LM_HEADS,
        noise=_noise(comparisons, refereed),
    )
    lm_metrics = distribution.lm_distribution(tf_judged, pt_judged, batches, tf_model.head)
    lacking = distribution.lacking_reference(runs.tf, runs.pt, pt_model.name)
    kl_verdict = distribution.judged(lm_metrics, options.kl_budget, lacking)
    broken += distribution.failures(kl_verdict)
    notes = list(tf_model.notes) + list(pt_model.notes) + gap_notes(gaps, dropped)
    if tapped and not components:
        notes.append(
            "Every tensor passed, so the sub-layer taps and isolated runs were skipped "
            "(`--localise always` runs them on every run)."
        )
    if not tapped and any(hidden_state_index(c.name) is not None for c in comparisons):
        notes.append(_untapped_note(tf_model, pt_model))
    if 0 < runs.float64_batches < len(batches):
        notes.append(_lazy_note(runs.float64_batches, len(batches)))
    notes += _widened_note(comparisons, options.referee)
    report = Report(
        check=options.label,
        model=tf_model.name,
        passed=passed and not broken,
        comparisons=comparisons + broken,  # after the layer rows, which zip with referees
        first_divergence=divergence,
        notes=notes,
        details={
            "compares": f"{tf_model.framework} (actual) vs PyTorch (expected), same weights "
            "and inputs",
            "judge": "tolerance" if options.tolerance else options.referee.describe(),
            "reference": pt_model.name,
            **_model_class_facts(tf_model, pt_model),
            "batches": len(batches),
            "sequences": int(sum(b.input_ids.shape[0] for b in batches)),
            "float64_batches": runs.float64_batches,
            "localise": options.localise,
            "taps": _taps_state(tapped, components),
            **_execution_facts(tf_model),
            "layers": layer_rows(comparisons, referees, components),
            "agreement": [asdict(a) for a in agreement],
            **distribution.details(lm_metrics, kl_verdict, tf_model.head),
            **_gold(tf_judged, pt_judged, batches, tf_model, options),
            "components": [component_row(c) for c in components],
        },
    )
    return note_inputs(with_findings(report, labels), batches)


def _budgeted(
    tf_model: TFSide,
    pt_model: Reference,
    batches: Sequence[Batch],
    options: CrosscheckOptions,
    budget: Any,
    tf_traces: Sequence[Trace] | None,
) -> Report:
    """The cross-check of a side judged by ``budget`` (see :mod:`.budgeted`): no float64
    run (it would judge nothing) and no sub-layer taps (every layer of a quantised model
    differs; the error growth says which differs most)."""
    runs = run_all(tf_model, pt_model, batches, False, tf_traces, Float64Runs("none"))
    masks = [b.attention_mask for b in batches]
    judge = BudgetJudge(budget, tf_model.quantisation)
    comparisons = compare_output_batches(
        runs.tf, runs.pt, masks=masks, compare=_judging(runs, judge)
    )
    head = tf_model.head
    noise = {c.name: budget.max for c in comparisons}
    lm = head in LM_HEADS
    agreement = task_agreement(runs.tf, runs.pt, masks, language_model=lm, noise=noise)
    comparisons += budgeted.agreement_failures(agreement, budget)
    lm_metrics = distribution.lm_distribution(runs.tf, runs.pt, batches, head)
    # a Keras-quantised file's LM head is judged by its mode's default too
    default = list(budgets_for(tf_model.quantisation).kl) if lm_metrics is not None else None
    kl_verdict = distribution.judged(lm_metrics, options.kl_budget or default)
    comparisons += distribution.failures(kl_verdict)
    rows = budgeted.growth(runs.tf, runs.pt, masks)
    kind = tf_model.quantisation
    # a mixed-mode file (keras int4+int8): each layer's growth by its own mode
    modes = tf_model.layer_modes if "+" in (kind or "") else None
    over, growth_details = budgeted.growth_judged(rows, kind, modes)
    comparisons += budgeted.growth_failures(over, f"{kind} vs {pt_model.framework}")
    weights = tf_model.weight_map()
    off = budgeted.scale_failures(weights, pt_model.weights)
    comparisons += budgeted.scale_rows(off)
    labels = _labels(tf_model, pt_model)
    divergence = budgeted.divergence(comparisons, rows, kind, over, weights.scales_on, off)
    _name_num_labels(divergence, labels)
    report = Report(
        check=options.label,
        model=tf_model.name,
        passed=all(c.passed for c in comparisons),
        comparisons=comparisons,
        first_divergence=divergence,
        notes=list(tf_model.notes) + list(pt_model.notes),
        details={
            "compares": f"{tf_model.framework} (actual) vs {pt_model.framework} (expected), same "
            "weights and inputs",
            "judge": judge.describe(),
            "reference": pt_model.name,
            **_model_class_facts(tf_model, pt_model),
            "batches": len(batches),
            "sequences": int(sum(b.input_ids.shape[0] for b in batches)),
            **_execution_facts(tf_model),
            **budgeted.details(rows, kind),
            **growth_details,
            **budgeted.quantiser_figures(runs.tf, runs.pt, masks),
            "budget": asdict(budget),
            "agreement": [asdict(a) for a in agreement],
            **distribution.details(lm_metrics, kl_verdict, head),
            **_gold(runs.tf, runs.pt, batches, tf_model, options),
        },
    )
    return note_inputs(with_findings(report, labels), batches)


def _gold(
    tf: Sequence[Trace],
    pt: Sequence[Trace],
    batches: Sequence[Batch],
    tf_model: TFSide,
    options: CrosscheckOptions,
) -> dict[str, Any]:
    """The report's ``details["gold"]`` where labels were given."""
    if options.labels is None or not tf or not pt:
        return {}
    id2label = getattr(tf_model.config, "id2label", None)
    found = gold_agreement(tf, pt, batches, tf_model.head, options.labels, id2label)
    return {"gold": asdict(found)}


def _labels(tf_model: TFSide, pt_model: Reference) -> Findings:
    """The label maps judged, for a head whose logits are the config's labels."""
    if tf_model.head not in LABELLED_HEADS:
        return Findings()
    return label_findings(tf_model.config, pt_model.config)


def _name_num_labels(divergence: Divergence | None, labels: Findings) -> None:
    """Heads of different sizes give logits of different shapes: the hint says why
    first (the weights it may name are a consequence)."""
    problem = labels.num_labels_problem()
    if divergence is not None and problem:
        divergence.hint = f"{problem}; {divergence.hint}" if divergence.hint else problem


def _untapped_note(tf_model: TFSide, pt_model: Reference) -> str:
    """Why the divergence is localised to a layer only: the architecture has no taps,
    or this side (a model of the user's own, some keras-hub ports) has none of its own."""
    if pt_model.localisable():
        return (
            f"{tf_model.name} has no sub-layer taps of its own ({tf_model.model_type} has "
            "them in its Hugging Face TF model), so the divergence is localised to a layer "
            "only."
        )
    return (
        f"Sub-layer taps are available for {', '.join(tapped_types())}; for "
        f"{tf_model.model_type} the divergence is localised to a layer only."
    )


def _lazy_note(ran: int, batches: int) -> str:
    """Why the float64 figures cover some batches only (``--referee lazy``)."""
    return (
        f"The float64 referee ran for {ran} of {batches} batches: on the other "
        f"{batches - ran} it could not have changed any verdict (the bound is in "
        "docs/crosscheck.md, 'Float64 only where it decides'), so the rmse/fp64 figures "
        "are over those it ran for. `--referee full` runs it on every batch, with the "
        "same verdicts."
    )


def _widened_note(comparisons: list[Comparison], referee: Referee) -> list[str]:
    """Which tensors the referee judged with a factor wider than the header's, for
    their few values (:meth:`Referee.factor_for`): the text shows the factor only on a
    failure, the JSON always."""
    wide = [
        f"{c.name} ({c.total} values: factor {c.referee['factor']:g})"
        for c in comparisons
        if c.referee and c.referee["factor"] > referee.factor
    ]
    if not wide:
        return []
    return [
        f"Judged with a wider factor for their few values, over which PyTorch's own error "
        f"is a poor estimate of its rounding: {', '.join(wide)} (docs/crosscheck.md, 'A "
        "referee instead of a magic number')."
    ]


def _taps_state(tapped: bool, components: list) -> str:
    """Whether the sub-layer taps and isolated runs ran (for the JSON and the text)."""
    if not tapped:
        return "not available (localised to the layer)"
    return "ran" if components else "skipped (every tensor passed)"


def _execution_facts(tf_model: TFSide) -> dict[str, Any]:
    """Device, eager/graph/XLA and precision of the TF side, when it was placed."""
    return tf_model.execution.describe()


_Done = dict[str, tuple[list, list, Comparison]]  # the leaves judged: name -> arrays, verdict


def _judging(runs: Runs, judge: Judge) -> Callable:
    """The leaf comparison: ``judge``'s, with the leaf's float64 sums as its truth where
    every float64 run held them (:func:`_float64_sums`)."""
    done: _Done = {}

    def compare(actual: list, expected: list, *, name: str, masks: Any, **_: Any) -> Comparison:
        comparison = _alias_of(name, actual, expected, done, runs.referee)
        if comparison is None:
            truth = _float64_sums(runs, name)
            comparison = judge.judge(name, actual, expected, masks=masks, truth=truth)
        done[name] = (actual, expected, comparison)
        return comparison

    return compare


def _float64_sums(runs: Runs, name: str) -> RefereeSums | None:
    """The leaf's referee sums where every float64 run held it, else None."""
    sums = runs.referee.get(name)
    return sums if sums is not None and sums.batches == runs.float64_batches > 0 else None


def _alias_of(
    name: str, actual: list, expected: list, done: _Done, sums: Mapping | None = None
) -> Comparison | None:
    """``last_hidden_state`` is the last of ``hidden_states`` in most models: where it
    holds the very same arrays on both sides, and its float64 ``sums`` are the same
    too, that leaf's judged comparison is its own, renamed (judged once: the same
    inputs give the same verdict)."""
    hidden = [n for n in done if hidden_state_index(n) is not None]
    if name != "last_hidden_state" or not hidden:
        return None
    last = max(hidden, key=hidden_state_index)
    a, e, c = done[last]
    pairs = zip([*a, *e], [*actual, *expected], strict=True)
    same = all(x.shape == y.shape and np.array_equal(x, y) for x, y in pairs)
    same = same and (sums or {}).get(last) == (sums or {}).get(name)
    return replace(c, name=name) if same else None


def _model_class_facts(tf_model: TFSide, pt_model: Reference) -> dict[str, str]:
    """The head checked (not shown for a base model) and the dtype the reference's
    checkpoint is stored in (not shown for float32): a float16 reference explains
    differences that look like defects."""
    facts = {}
    if tf_model.head is not Head.BASE:
        facts["head"] = tf_model.head.value
    stored = str(getattr(pt_model.config, "torch_dtype", None) or "").removeprefix("torch.")
    if stored and stored != "float32":
        facts["reference_checkpoint_dtype"] = stored
    return facts


def _noise(comparisons: list[Comparison], refereed: dict[str, RefereeResult]) -> dict[str, float]:
    """Per leaf, the per-element difference its judge allows: a few of the referee's
    allowed RMSE, or the tolerance's atol (what a near-tie flip is measured against)."""
    return {
        c.name: 4.0 * refereed[c.name].allowed_rmse if c.name in refereed else c.atol
        for c in comparisons
    }
