"""The PyTorch cross-check: a TF model against PyTorch on the same weights.

Every output and hidden state is compared. By default a float64 PyTorch run referees
(see :class:`tfparity.compare.Referee`) instead of a fixed threshold; explicit
``atol``/``rtol`` are the other mode. Where the architecture describes its sub-layers
(:mod:`tfparity.architectures`), taps and isolated runs localise the first divergence
to a layer and a component; elsewhere to the layer. Hints name a likely cause with
evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from ..adapters.interfaces import Reference, TFSide
from ..architectures import activation_name, tapped_types
from ..architectures.heads import Head
from ..compare import (
    Comparison,
    Referee,
    RefereeResult,
    RefereeSums,
    Tolerance,
    compare_batches,
    compare_output_batches,
    judged_by_referee,
    referee_batches,
)
from ..inputs import Batch, note_truncation
from ..results import Divergence, Hint, Report
from ..trace import Trace, hidden_state_index
from ..validation import nonfinite_weights, same_architecture
from . import DEFAULT_LOCALISE, budgeted, hints
from .agreement import task_agreement
from .checkpoints import checkpoint_gaps, gap_failures, gap_notes, judged
from .embeds import ensure_finite
from .export_source import NO_INTERMEDIATES


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


@dataclass
class _Runs:
    """Per-batch results of the TF and PyTorch runs, the float64 run's referee sums
    per leaf (its outputs are not kept), and the sub-layer records."""

    tf: list[Trace] = field(default_factory=list)
    pt: list[Trace] = field(default_factory=list)
    referee: dict[str, RefereeSums] = field(default_factory=dict)
    tf_taps: list[dict] = field(default_factory=list)
    pt_taps: list[dict] = field(default_factory=list)
    pt64_taps: list[dict] = field(default_factory=list)
    isolated: list[dict] = field(default_factory=list)


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
    # what the checkpoints hold decides what is judged (exit 2 for what cannot be)
    gaps = checkpoint_gaps(tf_model.holdings, pt_model.holdings)
    budget = budgeted.budget_of(tf_model.quantisation, options.budget)
    if budget is not None:
        return _budgeted(tf_model, pt_model, batches, options, budget, tf_traces)
    tapped = tf_model.localisable() and pt_model.localisable()
    runs = _run_all(tf_model, pt_model, batches, tapped and options.localise == "always", tf_traces)
    masks = [b.attention_mask for b in batches]
    refereed: dict[str, RefereeResult] = {}
    tf_judged, pt_judged = ([judged(t, gaps) for t in side] for side in (runs.tf, runs.pt))
    dropped = [n for n in runs.tf[0] if n not in tf_judged[0]] if runs.tf else []
    comparisons = compare_output_batches(
        tf_judged,
        pt_judged,
        masks=masks,
        tolerance=options.tolerance,
        check_dtype=False,
        compare=_refereeing(runs, options.referee, refereed),
    )
    referees = [refereed.get(c.name) for c in comparisons]
    if options.tolerance is None:
        comparisons = [
            _judged(c, r, options.referee) for c, r in zip(comparisons, referees, strict=True)
        ]
    passed = all(c.passed for c in comparisons)
    broken = gap_failures(gaps) + nonfinite_weights(tf_model.named_weights(), "TF")
    broken += nonfinite_weights(pt_model.named_weights(), "PyTorch")
    if tapped and not passed and not runs.tf_taps:
        runs = _run_all(tf_model, pt_model, batches, True)  # again, with taps, to localise
    components = _components(runs, masks, options.referee) if runs.tf_taps else []
    divergence = None if passed else localise(tf_model, pt_model, comparisons, components, runs)
    agreement = task_agreement(
        tf_judged,
        pt_judged,
        masks,
        language_model=tf_model.head in (Head.MASKED_LM, Head.CAUSAL_LM),
        noise=_noise(comparisons, refereed),
    )
    notes = list(tf_model.notes) + list(pt_model.notes) + gap_notes(gaps, dropped)
    if tapped and not components:
        notes.append(
            "Every tensor passed, so the sub-layer taps and isolated runs were skipped "
            "(`--localise always` runs them on every run)."
        )
    if not tapped and any(hidden_state_index(c.name) is not None for c in comparisons):
        notes.append(_untapped_note(tf_model, pt_model))
    report = Report(
        check=options.label,
        model=tf_model.name,
        passed=passed and not broken,
        comparisons=comparisons + broken,  # after the layer rows, which zip with referees
        first_divergence=divergence,
        notes=notes,
        details={
            "compares": "TensorFlow (actual) vs PyTorch (expected), same weights and inputs",
            "judge": "tolerance"
            if options.tolerance
            else f"float64 referee (factor {options.referee.factor:g}, floor "
            f"{options.referee.floor:g} x RMS)",
            "reference": pt_model.name,
            **_model_class_facts(tf_model, pt_model),
            "batches": len(batches),
            "sequences": int(sum(b.input_ids.shape[0] for b in batches)),
            "localise": options.localise,
            "taps": _taps_state(tapped, components),
            **_execution_facts(tf_model),
            "layers": _layer_rows(comparisons, referees, components),
            "agreement": [asdict(a) for a in agreement],
            "components": [_component_row(c) for c in components],
        },
    )
    return note_truncation(report, batches)


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
    runs = _run_all(tf_model, pt_model, batches, False, tf_traces, truths=False)
    masks = [b.attention_mask for b in batches]
    comparisons = compare_output_batches(runs.tf, runs.pt, masks=masks, check_dtype=False)
    head = tf_model.head
    noise = {c.name: budget.max for c in comparisons}
    lm = head in (Head.MASKED_LM, Head.CAUSAL_LM)
    agreement = task_agreement(runs.tf, runs.pt, masks, language_model=lm, noise=noise)
    comparisons = budgeted.judged(comparisons, agreement, budget)
    rows = budgeted.growth(runs.tf, runs.pt, masks)
    kind = tf_model.quantisation
    report = Report(
        check=options.label,
        model=tf_model.name,
        passed=all(c.passed for c in comparisons),
        comparisons=comparisons,
        first_divergence=budgeted.divergence(comparisons, rows, kind),
        notes=list(tf_model.notes) + list(pt_model.notes),
        details={
            "compares": "TensorFlow (actual) vs PyTorch (expected), same weights and inputs",
            "judge": budgeted.judge_line(kind, budget),
            "reference": pt_model.name,
            **_model_class_facts(tf_model, pt_model),
            "batches": len(batches),
            "sequences": int(sum(b.input_ids.shape[0] for b in batches)),
            **_execution_facts(tf_model),
            **budgeted.details(rows, kind),
            "budget": asdict(budget),
            "agreement": [asdict(a) for a in agreement],
        },
    )
    return note_truncation(report, batches)


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


def _taps_state(tapped: bool, components: list) -> str:
    """Whether the sub-layer taps and isolated runs ran (for the JSON and the text)."""
    if not tapped:
        return "not available (localised to the layer)"
    return "ran" if components else "skipped (every tensor passed)"


def _execution_facts(tf_model: TFSide) -> dict[str, Any]:
    """Device, eager/graph/XLA and precision of the TF side, when it was placed."""
    return tf_model.execution.describe()


def _run_all(
    tf_model: TFSide,
    pt_model: Reference,
    batches: Sequence[Batch],
    tapped: bool,
    tf_traces: Sequence[Trace] | None = None,
    truths: bool = True,
) -> _Runs:
    """``truths=False``: no float64 run (a side judged by budgets)."""
    runs = _Runs()
    if tapped:  # taps record Python-side layer calls: the runs are eager
        float64 = iter([_add_tapped_run(runs, tf_model, pt_model, batch) for batch in batches])
    else:
        # One framework at a time: switching between TensorFlow's and PyTorch's thread
        # pools batch by batch slows both (each spins after its work, holding cores).
        runs.tf = list(tf_traces) if tf_traces is not None else [tf_model.run(b) for b in batches]
        runs.pt = [pt_model.run(b) for b in batches]
        float64 = (pt_model.run(b, float64=True) for b in batches)  # one at a time
    for i in range(len(runs.pt)):
        ensure_finite(runs.pt[i], "the PyTorch reference")
        runs.pt[i] = _outputs_of(tf_model, runs.pt[i])
    for i, truth in enumerate(float64 if truths else []):
        _add_truth(runs, i, _outputs_of(tf_model, truth), batches[i].attention_mask)
    return runs


def _add_truth(runs: _Runs, i: int, truth: Trace, mask: Any) -> None:
    """Batch ``i``'s float64 run, added to each leaf's referee sums and then let go."""
    for name in truth:
        if name in runs.tf[i] and name in runs.pt[i]:
            sums = runs.referee.setdefault(name, RefereeSums())
            sums.add(runs.tf[i][name], runs.pt[i][name], truth[name], mask, name=name)


def _add_tapped_run(runs: _Runs, tf_model: TFSide, pt_model: Reference, batch: Batch) -> Trace:
    """One batch with sub-layer taps on all three sides, and the TF isolated runs; the
    float64 run is returned, for its referee sums."""
    tf_trace, tf_rec = tf_model.tapped_run(batch)
    pt, pt_rec = pt_model.recorded(batch, tapped=True)
    pt64, pt64_rec = pt_model.recorded(batch, float64=True, tapped=True)
    runs.tf.append(tf_trace)
    runs.pt.append(pt)
    runs.tf_taps.append(tf_rec)
    runs.pt_taps.append(pt_rec)
    runs.pt64_taps.append(pt64_rec)
    runs.isolated.append(tf_model.isolated(pt_rec, pt.hidden_states, batch))
    return pt64


def _outputs_of(tf_model: TFSide, trace: Trace) -> Trace:
    """The reference's tensors that the TF side produces at all: a keras-hub backbone
    has no counterpart of some HF outputs (RoBERTa's pooler); HF TF models compare all."""
    names = tf_model.output_names(trace)
    if names is None:
        return trace
    return Trace({k: v for k, v in trace.items() if k in names})


def _refereeing(runs: _Runs, referee: Referee, refereed: dict[str, RefereeResult]) -> Callable:
    """A leaf comparison that also takes the leaf's float64 referee verdict (into
    ``refereed``, by name) where every float64 run held it."""
    done: dict[str, tuple[list, list, Comparison]] = {}

    def compare(actual: list, expected: list, *, name: str, **kwargs: Any) -> Comparison:
        comparison = _alias_of(name, actual, expected, done)
        if comparison is None:
            comparison = compare_batches(actual, expected, name=name, **kwargs)
        done[name] = (actual, expected, comparison)
        sums = runs.referee.get(name)
        if sums is not None and sums.batches == len(runs.tf):
            verdict = sums.result(name, referee)
            if verdict is not None:
                refereed[name] = verdict
        return comparison

    return compare


def _alias_of(
    name: str, actual: list, expected: list, done: dict[str, tuple[list, list, Comparison]]
) -> Comparison | None:
    """``last_hidden_state`` is the last of ``hidden_states`` in most models: where it
    holds the very same arrays on both sides, that leaf's comparison is its own, renamed
    (compared once; its referee verdict still comes from its own float64 sums)."""
    hidden = [n for n in done if hidden_state_index(n) is not None]
    if name != "last_hidden_state" or not hidden:
        return None
    a, e, c = done[max(hidden, key=hidden_state_index)]
    pairs = zip([*a, *e], [*actual, *expected], strict=True)
    same = all(x.shape == y.shape and np.array_equal(x, y) for x, y in pairs)
    return replace(c, name=name) if same else None


def _judged(c: Comparison, r: RefereeResult | None, referee: Referee) -> Comparison:
    """``c`` judged by its referee verdict ``r``, with the bound that decided it."""
    return judged_by_referee(c, r, referee)


@dataclass
class Component:
    """One tap: accumulated (full run) and isolated (fed PyTorch's input) verdicts."""

    name: str
    accumulated: RefereeResult
    isolated: RefereeResult | None


def _components(runs: _Runs, masks: list, referee: Referee) -> list[Component]:
    found = []
    for name in runs.pt_taps[0]:
        if not all(name in r for r in runs.tf_taps):
            continue
        acc = referee_batches(
            name,
            [r[name] for r in runs.tf_taps],
            [r[name] for r in runs.pt_taps],
            [r[name] for r in runs.pt64_taps],
            masks=masks,
            referee=referee,
        )
        iso = None
        if all(name in r for r in runs.isolated):
            # rmse(TF isolated, PT fp32) against rmse(PT fp64, PT fp32).
            iso = referee_batches(
                name,
                [r[name] for r in runs.isolated],
                [r[name] for r in runs.pt64_taps],
                [r[name] for r in runs.pt_taps],
                masks=masks,
                referee=referee,
            )
        found.append(Component(name, acc, iso))
    return found


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


# ----------------------------------------------------------------------------- localisation


def localise(
    tf_model: TFSide,
    pt_model: Reference,
    comparisons: list[Comparison],
    components: list[Component],
    runs: _Runs,
) -> Divergence:
    failing = [c for c in comparisons if not c.passed]
    hidden = sorted(k for c in failing if (k := hidden_state_index(c.name)) is not None)
    if not hidden and all(hidden_state_index(c.name) is None for c in comparisons):
        hint = _hint(tf_model, pt_model, "output", "output", runs)  # every weight, if mapped
        return Divergence(None, "output", None, f"{NO_INTERMEDIATES} {hint}")
    if not hidden:
        where = _past_hidden_states(tf_model, failing, comparisons)
        hint = _hint(tf_model, pt_model, where, where, runs)
        return Divergence(None, where, where if where != "output" else None, hint)
    k = hidden[0]
    if k == 0:
        hint = _hint(tf_model, pt_model, "embeddings", "embeddings", runs)
        hint = _known(tf_model, pt_model, 0, "embeddings", "embeddings", hint)
        return Divergence(0, "embeddings", "embeddings", hint)
    layer = k - 1
    component = _component_of(layer, components)
    hint = _hint(tf_model, pt_model, layer, component, runs)
    return Divergence(k, layer, component, _known(tf_model, pt_model, k, layer, component, hint))


def _past_hidden_states(
    tf_model: TFSide, failing: list[Comparison], comparisons: list[Comparison]
) -> str:
    """Where a divergence that no hidden state shows is: the pooler, the head, or, for
    a base model whose hidden states were not compared at all (a model of the user's
    own without a layer map), its output."""
    compared = any(hidden_state_index(c.name) is not None for c in comparisons)
    if not compared and any(c.name == "last_hidden_state" for c in failing):
        return "output"  # before the pooler, which reads it
    if any(c.name.startswith("pooler") for c in failing):
        return "pooler"
    return "head" if compared or tf_model.head is not Head.BASE else "output"


def _known(
    tf_model: TFSide, pt_model: Reference, hidden_state: int, layer: Any, component: Any, hint: str
) -> str:
    """The hint, with the registry's finding where the divergence is the known
    difference of this port (e.g. transformers' TF OpenAI GPT's exact GELU) and how to
    check the rest of the port; not where the reference already computes as the port."""
    known = tf_model.known_difference
    if known is None or (known.hidden_state, known.layer, known.component) != (
        hidden_state,
        layer,
        component,
    ):
        return hint
    if known.reproduced_by(pt_model.config):
        return hint
    return f"{hint}; a known difference of this port: {known.finding}{known.rerun()}"


def _component_of(layer: int, components: list[Component]) -> str | None:
    """The layer's first failing component (isolated first); None without taps."""
    mine = [c for c in components if c.name.startswith(f"layer_{layer}.")]
    if not mine:
        return None
    for judge in ("isolated", "accumulated"):
        for c in mine:
            result = getattr(c, judge)
            if result is not None and not result.passed:
                return c.name.split(".", 1)[1]
    return "attention"


def _hint(
    tf_model: TFSide, pt_model: Reference, layer: Any, component: str | None, runs: _Runs
) -> str:
    found = hints.config_differences(tf_model.config, pt_model.config, pt_model.config_changes)
    scope = pt_model.weight_scope(layer, component)
    if layer == "head":  # the head's own weights, and the pooler that feeds it
        scope = [(name, "") for name in pt_model.head_weight_names()]
    if layer == "output":  # no hidden state says where: every weight may be the one
        scope = [("", "")]
    pt_weights = pt_model.weights() if scope else {}
    tf_weights = tf_model.weights_for(pt_weights) if pt_weights else {}
    for prefix, contains in scope if pt_weights else []:
        differ = hints.weight_differences(tf_weights, pt_weights, prefix, contains)
        found += [_with_weight_note(tf_model, h) for h in differ]
        found += tf_model.unported(pt_weights, prefix, contains)  # a converter's own map
    if isinstance(layer, int) and runs.pt_taps and tf_model.localisable():
        found += _numeric_signature(tf_model, pt_model, layer, component, runs)
    stored = not pt_weights and not pt_model.weights()  # outputs only: no weights to compare
    if not found:
        if stored:
            text = hints.STORED_NOTE
        elif pt_weights and not tf_weights:  # e.g. an export of a Keras 3 model
            text = (
                f"The config agrees here; {tf_model.name}'s weights are not known by "
                "PyTorch name, so they were not compared: a dropped, transposed or scaled "
                "weight of this component, or a computation difference."
            )
        else:
            text = hints.COMPUTATION_NOTE
        found.append(Hint("note", text))
    return "; ".join(h.text for h in found)


def _with_weight_note(tf_model: TFSide, hint: Hint) -> Hint:
    """A weight hint, with what the TF side knows of how that weight was converted."""
    extra = tf_model.weight_note(hint.weight) if hint.weight else None
    return replace(hint, text=f"{hint.text} ({extra})") if extra else hint


def _numeric_signature(
    tf_model: TFSide, pt_model: Reference, layer: int, component: str | None, runs: _Runs
) -> list[Hint]:
    """Which activation (intermediate) or LayerNorm epsilon (output) reproduces each side,
    computed from PyTorch's inputs to the component and the TF weights."""
    ffn = tf_model.feed_forward(layer)
    if ffn is None:
        return []
    pt_rec, tf_iso = runs.pt_taps[0], runs.isolated[0]
    attn = pt_rec[f"layer_{layer}.attention"]
    if component == "intermediate":
        kernel, bias = ffn.up
        text = hints.activation_hint(
            attn @ kernel + bias,
            pt_rec[f"layer_{layer}.intermediate"],
            tf_iso[f"layer_{layer}.intermediate"],
            ffn.activation,
            activation_name(pt_model.config),
        )
        return [Hint("activation", text)]
    if component == "output" and ffn.norm is not None:
        kernel, bias = ffn.down
        pre = pt_rec[f"layer_{layer}.intermediate"] @ kernel + bias + attn
        gamma, beta, eps = ffn.norm
        text = hints.layernorm_hint(pre, gamma, beta, pt_rec[f"layer_{layer}.output"], eps)
        return [Hint("layernorm", text)]
    return []


# ----------------------------------------------------------------------------- tables


def _layer_rows(
    comparisons: list[Comparison], referees: list[RefereeResult | None], components: list[Component]
) -> list[dict[str, Any]]:
    rows = []
    for c, r in zip(comparisons, referees, strict=True):
        k = hidden_state_index(c.name)
        if k is None:
            continue
        layer = "embeddings" if k == 0 else k - 1
        prefix = "embeddings" if k == 0 else f"layer_{k - 1}."
        mine = [x for x in components if x.name.startswith(prefix)]
        isolated = [x.isolated for x in mine if x.isolated is not None]
        rows.append(
            {
                "hidden_state": k,
                "layer": layer,
                "max_abs_diff": c.max_abs_diff,
                "mean_abs_diff": c.mean_abs_diff,
                "cosine": c.cosine,
                "rmse_vs_fp64": r.actual_rmse if r else None,
                "reference_rmse_vs_fp64": r.reference_rmse if r else None,
                "accumulated_ok": all(x.accumulated.passed for x in mine) if mine else None,
                "isolated_ok": all(x.passed for x in isolated) if isolated else None,
                "isolated_rmse": max((x.actual_rmse for x in isolated), default=None),
                "passed": c.passed,
            }
        )
    return rows


def _component_row(c: Component) -> dict[str, Any]:
    return {
        "name": c.name,
        "accumulated_rmse": c.accumulated.actual_rmse,
        "reference_rmse": c.accumulated.reference_rmse,
        "accumulated_ok": c.accumulated.passed,
        "isolated_rmse": c.isolated.actual_rmse if c.isolated else None,
        "isolated_ok": c.isolated.passed if c.isolated else None,
    }
