"""The embeds check: the ``inputs_embeds`` path must match the ``input_ids`` path.

For each batch the TF model runs twice: with ``input_ids``, and with the word
embeddings gathered on the Keras side passed as ``inputs_embeds`` (same attention
mask and token type ids). Every output and every hidden state is compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import validation
from ..adapters.interfaces.sides import TFSide
from ..compare import Comparison, Tolerance, all_finite, compare_output_batches, to_numpy
from ..errors import TfparityError
from ..inputs import Batch, note_inputs
from ..results import Divergence, Report
from ..trace import Trace, hidden_state_index, layer_of, layer_text
from ..validation import nonfinite_weights
from .diagnosis import diagnose_embeddings
from .diagnosis.advice import short_cause


@dataclass(frozen=True)
class EmbedsOptions:
    """``embeds_fn`` supplies the embeddings to test (default: gather by ids)."""

    tolerance: Tolerance | None = None
    embeds_fn: Callable[[Batch], Any] | None = None
    references: Sequence[Trace] | None = None  # the input_ids runs, when already made

    @classmethod
    def from_arguments(
        cls,
        *,
        tolerance: Tolerance | None = None,
        embeds_fn: Callable[[Batch], Any] | None = None,
        references: Sequence[Trace] | None = None,
    ) -> EmbedsOptions:
        """The options :func:`tfparity.check_embeds` and ``tfparity check`` were given,
        checked once for both before any model loads."""
        validation.tolerance(tolerance)
        validation.optional_callable(embeds_fn, "embeds_fn")
        return cls(tolerance=tolerance, embeds_fn=embeds_fn, references=references)


class NonFiniteOutputError(TfparityError):
    """The reference run itself produced NaN or Inf: parity cannot be judged."""


def check_embeds(
    model: TFSide, batches: Sequence[Batch], options: EmbedsOptions = EmbedsOptions()
) -> Report:
    if model.inputs_embeds_reason is not None:  # an export without that path
        raise TfparityError(f"The embeds check cannot run: {model.inputs_embeds_reason}")
    expected, actual, fed = [], [], []
    for i, batch in enumerate(batches):
        reference = options.references[i] if options.references is not None else model.run(batch)
        ensure_finite(reference, "the input_ids path")
        if options.embeds_fn is None:
            embeds = model.gather(batch.input_ids)
        else:
            width = int(model.gather(batch.input_ids[:1, :1]).shape[-1])
            embeds = validation.embeds(options.embeds_fn(batch), batch.shape, width)
        actual.append(model.run(batch, inputs_embeds=embeds))
        expected.append(reference)
        fed.append(embeds)
    masks = [b.attention_mask for b in batches]
    comparisons = compare_output_batches(actual, expected, masks=masks, tolerance=options.tolerance)
    passed = all(c.passed for c in comparisons)
    broken = nonfinite_weights(
        model.named_weights()
    )  # outputs alone miss NaN rows no input reaches
    report = Report(
        check="embeds",
        model=model.name,
        passed=passed and not broken,
        comparisons=comparisons + broken,
        first_divergence=None
        if passed
        else localise(model, comparisons, batches, Fed(fed, expected)),
        details=_details(batches, options.embeds_fn is not None),
        notes=list(model.notes) + _ids_only_notes(model, options),
    )
    return note_inputs(report, batches)


def _ids_only_notes(model: TFSide, options: EmbedsOptions) -> list[str]:
    """Say so where the ids path changes gathered embeddings: the default gather applied
    the same change (a PASS is then not silent about it), a user's embeds_fn must too."""
    change = model.ids_only_change
    if change is None:
        return []
    if options.embeds_fn is None:
        return [f"{change.reason}; the gather applied the same change ({change.code})."]
    return [f"{change.reason}; your embeddings must include it ({change.code})."]


def ensure_finite(trace: Trace, where: str) -> None:
    """Raise (exit 2) when a reference run holds NaN or Inf."""
    for name, array in trace.items():
        if np.issubdtype(array.dtype, np.floating) and not all_finite(array):
            index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
            raise NonFiniteOutputError(
                f"The model's output {name} holds NaN or Inf on {where} (first at index "
                f"{index}), so parity cannot be judged. Check the weights for NaN/Inf "
                "and the precision the model runs in."
            )


@dataclass(frozen=True)
class Fed:
    """What the embeds path was fed, per batch, and the ids runs it was judged against."""

    embeds: Sequence[Any]
    references: Sequence[Trace]


def localise(
    model: TFSide,
    comparisons: list[Comparison],
    batches: Sequence[Batch],
    fed: Fed | None = None,
) -> Divergence:
    """The first failing hidden state, and why the two paths might part there."""
    failing = [c for c in comparisons if not c.passed]
    hidden = sorted(k for c in failing if (k := hidden_state_index(c.name)) is not None)
    if hidden and hidden[0] == 0:
        if fed is not None and _has_tables(model):
            hint, cause = _diagnosed(model, batches, fed)
            return Divergence(0, "embeddings", "embeddings", hint, cause=cause)
        return Divergence(0, "embeddings", "embeddings", embeddings_hint(model, batches))
    if hidden:
        k = hidden[0]
        return Divergence(
            k,
            layer_of(k),
            "attention",
            f"The embedding outputs agree but {layer_text(k)} differs: the two "
            "paths build the attention mask or bias differently.",
        )
    component = "pooler" if any(c.name.startswith("pooler") for c in failing) else "head"
    return Divergence(
        None,
        component,
        component,
        "Every hidden state agrees; only the model's final outputs differ.",
    )


def embeddings_hint(model: TFSide, batches: Sequence[Batch], fed: Fed | None = None) -> str:
    """What the fed embeddings are, by the diagnosis ``tfparity diagnose`` makes, on the
    first batch whose embeddings are not the gathered ones; a side without embedding
    tables (an export, keras-hub) gets the causes the batches alone show."""
    if fed is not None and _has_tables(model):
        return _diagnosed(model, batches, fed)[0]
    left_padded = any((b.attention_mask[:, 0] == 0).any() for b in batches)
    if model.padding_aware_positions and left_padded:
        return (
            f"{model.model_type} makes padding-aware position ids from input_ids but "
            "sequential ones from inputs_embeds, so with left padding the two paths use "
            "different positions. Pad on the right, or pass position_ids explicitly "
            "(computed from input_ids) on both paths."
        )
    return (
        "The embedding output differs, so the inputs_embeds fed in are not the raw word "
        "embeddings the input_ids path gathers. A common cause is feeding "
        "hidden_states[0], which already holds position and token-type embeddings and "
        "LayerNorm; gather the word-embedding matrix by the ids instead: "
        "tf.gather(model.get_input_embeddings().weight, input_ids)."
    )


def _diagnosed(model: TFSide, batches: Sequence[Batch], fed: Fed) -> tuple[str, str | None]:
    """The diagnosis's hint, and what the fed tensor is for the verdict line."""
    arrays = [np.asarray(to_numpy(e)) for e in fed.embeds]
    pick = next(
        (i for i, (b, e) in enumerate(zip(batches, arrays, strict=True)) if _differs(model, b, e)),
        0,
    )
    found = diagnose_embeddings(
        model, batches[pick], arrays[pick], fed.references[pick], outputs_match=False
    )
    where = f"batch {pick}: " if len(batches) > 1 else ""
    cause = short_cause(found)
    return f"{where}{found.hint}", (f"{where}{cause}" if cause else None)


def _has_tables(model: TFSide) -> bool:
    try:
        model.embedding_parts()
    except TfparityError:  # the side's refusal: it does not expose its tables
        return False
    return True


def _differs(model: TFSide, batch: Batch, embeds: np.ndarray) -> bool:
    """Whether the fed embeddings differ from the gathered ones at a real token."""
    gathered = np.asarray(to_numpy(model.gather(batch.input_ids)))
    valid = batch.attention_mask.astype(bool)
    return bool((embeds[valid] != gathered[valid]).any())


def _details(batches: Sequence[Batch], own: bool) -> dict[str, Any]:
    fed = "embeds_fn's embeddings" if own else "word embeddings gathered by ids"
    return {
        "compares": f"inputs_embeds ({fed}) vs input_ids",
        "batches": len(batches),
        "sequences": int(sum(b.input_ids.shape[0] for b in batches)),
        "tokens": int(sum(b.attention_mask.sum() for b in batches)),
        "padding_side": _padding_side(batches),
    }


def _padding_side(batches: Sequence[Batch]) -> str:
    masks = [b.attention_mask for b in batches if (b.attention_mask == 0).any()]
    if not masks:
        return "none"
    return "left" if any((m[:, 0] == 0).any() for m in masks) else "right"
