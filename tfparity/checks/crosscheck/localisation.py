"""Where a failing cross-check diverges first: the hidden state, layer and component
(from the sub-layer taps and isolated runs), past the last layer into the pooler or the
head, and the hint that names a likely cause with evidence (weights, config, numeric
signatures, the registry's known differences); and the per-layer tables of the report."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...adapters.interfaces.sides import Reference, TFSide
from ...adapters.interfaces.weight_map import WeightMap
from ...architectures import activation_name
from ...architectures.heads import LABEL_OUTPUTS, SPAN_OUTPUTS, Head, reordered_outputs
from ...compare import Comparison, Referee, RefereeResult, known_difference_note
from ...results import Divergence, Hint
from ...trace import EMBEDDINGS, hidden_state_index, layer_of
from . import hints
from .artefacts import id_to_label, is_default
from .decoder import failing_decoder_state
from .export_source import NO_INTERMEDIATES
from .runs import Runs
from .variation import Variation


@dataclass
class Component:
    """One tap: accumulated (full run) and isolated (fed PyTorch's input) verdicts."""

    name: str
    accumulated: RefereeResult
    isolated: RefereeResult | None


def components_of(runs: Runs, masks: list, referee: Referee) -> list[Component]:
    found = []
    for name in runs.pt_taps[0]:
        if not all(name in r for r in runs.tf_taps):
            continue
        tf, pt, pt64 = (
            [r[name] for r in side] for side in (runs.tf_taps, runs.pt_taps, runs.pt64_taps)
        )
        if any(np.shape(a) != np.shape(b) for a, b in zip(tf, pt, strict=True)):
            continue  # another computation (a wrong --pt): the hidden states say so
        acc = referee.batches(name, tf, pt, pt64, masks)
        iso = None
        if all(name in r for r in runs.isolated):
            # rmse(TF isolated, PT fp32) against rmse(PT fp64, PT fp32).
            iso = referee.batches(name, [r[name] for r in runs.isolated], pt64, pt, masks)
        found.append(Component(name, acc, iso))
    return found


# ----------------------------------------------------------------------------- localisation


def localise(
    tf_model: TFSide,
    pt_model: Reference,
    comparisons: list[Comparison],
    components: list[Component],
    runs: Runs,
    disagrees: tuple[str, ...] = (),
    varies: Variation | None = None,
) -> Divergence:
    """The first divergence and its hint; ``disagrees``: config fields the caller found
    to differ outside the hint fields (``num_labels``), so that no hint past the hidden
    states says the config agrees; ``varies``: TF's outputs change from run to run
    (:mod:`.variation`), which leads the hint and replaces the numeric signatures (fitted
    to a tensor that changes on every run, they name causes that are not there)."""
    if varies is not None:  # no numeric signature: the taps' records are not repeatable
        runs = replace(runs, pt_taps=[])
    failing = [c for c in comparisons if not c.passed]
    hidden = sorted(k for c in failing if (k := hidden_state_index(c.name)) is not None)
    decoder = None if hidden else failing_decoder_state(comparisons, tf_model, pt_model)
    if decoder is not None:  # a seq2seq LM's decoder parts past its clean encoder
        return decoder
    if not hidden and all(hidden_state_index(c.name) is None for c in comparisons):
        hint, cause = _hint(tf_model, pt_model, "output", "output", runs, disagrees, varies)
        return Divergence(None, "output", None, f"{NO_INTERMEDIATES} {hint}", cause=cause)
    if not hidden:
        where = _past_hidden_states(tf_model, failing, comparisons)
        hint, cause = _hint(tf_model, pt_model, where, where, runs, disagrees, varies)
        return Divergence(None, where, where if where != "output" else None, hint, cause=cause)
    k = hidden[0]
    if k == 0:
        hint, cause = _hint(tf_model, pt_model, "embeddings", "embeddings", runs, (), varies)
        hint = _known(tf_model, pt_model, 0, "embeddings", "embeddings", hint)
        return Divergence(0, "embeddings", "embeddings", hint, cause=cause)
    layer = layer_of(k)
    component = _component_of(layer, components)
    hint, cause = _hint(tf_model, pt_model, layer, component, runs, (), varies)
    hint = _known(tf_model, pt_model, k, layer, component, hint)
    return Divergence(k, layer, component, hint, cause=cause)


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
    check the rest of the port (:func:`known_difference_note`, as the gradients')."""
    known = tf_model.known_difference
    return hint + known_difference_note(known, pt_model.config, hidden_state, layer, component)


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
    tf_model: TFSide,
    pt_model: Reference,
    layer: Any,
    component: str | None,
    runs: Runs,
    disagrees: tuple[str, ...] = (),
    varies: Variation | None = None,
) -> tuple[str, str]:
    """The hint, and the known cause the verdict line states (:func:`known_cause`)."""
    found = hints.config_differences(tf_model.config, pt_model.config, pt_model.config_changes)
    scope = pt_model.weight_scope(layer, component)
    if layer == "head":  # the head's own weights, and the pooler that feeds it
        scope = [(name, "") for name in pt_model.head_weight_names()]
    if layer == "output":  # no hidden state says where: every weight may be the one
        scope = [("", "")]
    pt_weights = pt_model.weights() if scope else {}
    weights = tf_model.weight_map()
    tf_weights = weights.weights_for(pt_weights) if pt_weights else {}
    for prefix, contains in scope if pt_weights else []:
        differ = hints.weight_differences(tf_weights, pt_weights, prefix, contains)
        found += [_with_weight_note(weights, h) for h in differ]
        found += weights.unported(pt_weights, prefix, contains)  # a converter's own map
    if layer in ("head", "output"):
        found = _reordered_head(tf_model, pt_model, found, runs) + found
    if isinstance(layer, int) and runs.pt_taps and tf_model.localisable():
        found += _numeric_signature(tf_model, pt_model, layer, component, runs)
    stored = not pt_weights and not pt_model.weights()  # outputs only: no weights to compare
    if varies is not None:  # the cause: the config and weights may well agree
        text = "; ".join(h.text for h in [Hint("variation", varies.hint()), *found])
        return text, f"TF's outputs change from run to run (from {varies.where} on)"
    if not found:
        if disagrees:  # the caller names the field; say what follows, not "agrees"
            text = hints.disagreeing_note(disagrees, stored)
        elif stored:
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
    return "; ".join(h.text for h in found), known_cause(found)


# The hints that state a fact found (a weight, a config field, the head's order), not
# a likely cause (an activation or epsilon fitted, a note).
CAUSES = ("config", "weight", "unported", "permutation")


def known_cause(found: list[Hint]) -> str:
    """The first fact found, for the verdict line; ``(and N more)`` where there are
    more; empty where the hint has only likely causes."""
    facts = [h.text for h in found if h.kind in CAUSES]
    if not facts:
        return ""
    return facts[0] + (f" (and {len(facts) - 1} more)" if len(facts) > 1 else "")


def _reordered_head(
    tf_model: TFSide, pt_model: Reference, found: list[Hint], runs: Runs
) -> list[Hint]:
    """The head's classes (or QA's start and end) in another order, named as such: where
    every head weight that differs is PyTorch's with its rows reordered the same way,
    or, with no weights to compare (an export, stored outputs), where TF's logits are
    PyTorch's with their columns reordered."""
    weights = [h for h in found if h.kind == "weight"]
    orders = {h.permutation for h in weights}
    if weights:
        order = orders.pop() if len(orders) == 1 else None
    else:
        order = _reordered_logits(tf_model.head, runs)
    if order is None:
        return []
    tf_labels, pt_labels = id_to_label(tf_model.config), id_to_label(pt_model.config)
    if tf_labels is None or pt_labels is None or is_default(tf_labels) or is_default(pt_labels):
        tf_labels = pt_labels = None  # LABEL_0, ... name nothing the ids do not
    text = reordered_outputs(tf_model.head, order, tf_labels, pt_labels)
    return [Hint("permutation", text if weights else f"{text} (from the logits)")]


def _reordered_logits(head: Head, runs: Runs) -> tuple[int, ...] | None:
    """The columns of the first batch's logits (QA's start and end as two columns) that
    TF holds in another order than PyTorch; None where they are in the same order."""
    if not runs.tf or not runs.pt:
        return None
    tf, pt = runs.tf[0], runs.pt[0]
    names = list(SPAN_OUTPUTS) if head is Head.QUESTION_ANSWERING else list(LABEL_OUTPUTS)
    if not all(n in tf and n in pt for n in names):
        return None
    if len(names) == 1:
        return hints.column_permutation(tf[names[0]], pt[names[0]])
    stack = [np.stack([t[n] for n in names], axis=-1) for t in (tf, pt)]
    return hints.column_permutation(*stack)


def _with_weight_note(weights: WeightMap, hint: Hint) -> Hint:
    """A weight hint, with what the TF side knows of how that weight was converted."""
    extra = weights.note(hint.weight) if hint.weight else None
    return replace(hint, text=f"{hint.text} ({extra})") if extra else hint


def _numeric_signature(
    tf_model: TFSide, pt_model: Reference, layer: int, component: str | None, runs: Runs
) -> list[Hint]:
    """Which activation (intermediate) or LayerNorm epsilon (output) reproduces each side,
    computed from PyTorch's inputs to the component and the TF weights."""
    ffn = tf_model.weight_map().feed_forward(layer)
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


def layer_rows(
    comparisons: list[Comparison], referees: list[RefereeResult | None], components: list[Component]
) -> list[dict[str, Any]]:
    rows = []
    for c, r in zip(comparisons, referees, strict=True):
        k = hidden_state_index(c.name)
        if k is None:
            continue
        layer = layer_of(k)
        prefix = EMBEDDINGS if layer == EMBEDDINGS else f"layer_{layer}."
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


def component_row(c: Component) -> dict[str, Any]:
    return {
        "name": c.name,
        "accumulated_rmse": c.accumulated.actual_rmse,
        "reference_rmse": c.accumulated.reference_rmse,
        "accumulated_ok": c.accumulated.passed,
        "isolated_rmse": c.isolated.actual_rmse if c.isolated else None,
        "isolated_ok": c.isolated.passed if c.isolated else None,
    }
