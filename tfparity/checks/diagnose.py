"""The diagnose check: what is this ``inputs_embeds`` tensor, and how to fix the pipeline.

A user feeds embeddings that give different outputs than the ids. The check rebuilds
every stage the embedding layer computes from the ids (raw word embeddings, plus
positions, plus token types, after the LayerNorm = ``hidden_states[0]``, and a copy
scaled by sqrt(width)), takes every hidden state from the one run of the ids, and names
what the tensor is (see :mod:`.diagnosis`, which the embeds check shares); it compares
the two runs' outputs and says what to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import validation
from ..adapters.interfaces.embeddings import EmbeddingParts
from ..adapters.interfaces.sides import TFSide
from ..compare import Comparison, Tolerance, compare_output_batches, to_numpy
from ..errors import TfparityError
from ..inputs import Batch, integer_ids
from ..results import Divergence, Report
from ..trace import Trace
from .diagnosis import diagnose_embeddings


@dataclass(frozen=True)
class DiagnoseInputs:
    """The ids (with mask, type and position ids) and the embeddings the user fed."""

    batch: Batch
    embeds: np.ndarray


@dataclass(frozen=True)
class DiagnoseOptions:
    tolerance: Tolerance | None = None

    @classmethod
    def from_arguments(cls, *, tolerance: Tolerance | None = None) -> DiagnoseOptions:
        """The options :func:`tfparity.diagnose` and ``tfparity diagnose`` were given,
        checked once for both (the arrays: :func:`diagnose_inputs`)."""
        return cls(tolerance=validation.tolerance(tolerance))


@dataclass(frozen=True)
class InputNames:
    """What each input is called in messages: the API's parameter names, or the CLI's
    flags with their files (``--embeds emb.npy``)."""

    ids: str = "input_ids"
    embeds: str = "inputs_embeds"
    attention_mask: str = "attention_mask"
    token_type_ids: str = "token_type_ids"
    position_ids: str = "position_ids"


def diagnose_inputs(
    ids: Any,
    embeds: Any,
    *,
    attention_mask: Any = None,
    token_type_ids: Any = None,
    position_ids: Any = None,
    names: InputNames = InputNames(),
) -> DiagnoseInputs:
    """Check the arrays against each other (exit 2 if bad): ids range-checked in the
    dtype they arrive in, embeddings floating and finite, shapes matching. 1-D ids with
    2-D embeddings are taken as one sequence."""
    id_array = integer_ids(ids, names.ids)
    emb = to_numpy(embeds)
    if not np.issubdtype(emb.dtype, np.floating):
        raise TfparityError(f"{names.embeds} holds {emb.dtype}, not floating-point numbers.")
    _finite(emb, names.embeds)
    if id_array.ndim == 1 and emb.ndim == 2:
        id_array, emb = id_array[None], emb[None]
    if id_array.ndim != 2 or emb.ndim != 3:
        raise TfparityError(
            f"{names.ids} must be [batch, seq] and {names.embeds} [batch, seq, hidden]; got "
            f"{list(id_array.shape)} and {list(emb.shape)}."
        )
    if emb.shape[:2] != id_array.shape:
        raise TfparityError(
            f"{names.ids} {list(id_array.shape)} and {names.embeds} {list(emb.shape)} do not "
            "match: the embeddings must hold one vector per id ([batch, seq, hidden] for "
            "[batch, seq])."
        )
    extra = {
        "attention_mask": (attention_mask, names.attention_mask),
        "token_type_ids": (token_type_ids, names.token_type_ids),
        "position_ids": (position_ids, names.position_ids),
    }
    arrays: dict[str, np.ndarray | None] = {}
    for key, (value, name) in extra.items():
        arrays[key] = None if value is None else integer_ids(value, name)
        if arrays[key] is not None and arrays[key].shape != id_array.shape:
            raise TfparityError(
                f"{name} has shape {list(arrays[key].shape)}, but {names.ids} has "
                f"{list(id_array.shape)}; they must match."
            )
    mask = arrays["attention_mask"]
    batch = Batch(
        input_ids=id_array,
        attention_mask=np.ones_like(id_array) if mask is None else mask,
        token_type_ids=arrays["token_type_ids"],
        position_ids=arrays["position_ids"],
    )
    return DiagnoseInputs(batch, emb)


def _finite(embeds: np.ndarray, what: str) -> None:
    """NaN or Inf in the user's embeddings is the answer itself: no stage of the model
    makes them from finite weights, so say so instead of a verdict of "unknown"."""
    bad = ~np.isfinite(embeds)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise TfparityError(
            f"{what} holds {int(np.isnan(embeds).sum())} NaN and {int(np.isinf(embeds).sum())} "
            f"Inf values (first at index {where}): these embeddings are broken before the "
            "model sees them. Check how they were computed (overflow in float16? a division "
            "by zero? uninitialised memory?)."
        )


# ---------------------------------------------------------------------- the check


def check_diagnose(
    model: TFSide, inputs: DiagnoseInputs, options: DiagnoseOptions = DiagnoseOptions()
) -> Report:
    parts = model.embedding_parts()  # exit 2 on a side that does not expose them
    batch = inputs.batch
    _finite(np.asarray(inputs.embeds), "inputs_embeds")
    _check_width(inputs.embeds, parts)
    reference, comparisons = _compare_outputs(model, inputs, options)
    outputs_match = all(c.passed for c in comparisons)
    found = diagnose_embeddings(model, batch, inputs.embeds, reference, outputs_match)
    passed = found.verdict == "word_embeddings" and found.ids_all_match and outputs_match
    details: dict[str, Any] = {
        **found.details(),
        "embeds_shape": list(inputs.embeds.shape),
        "embeds_dtype": str(inputs.embeds.dtype),
        "model_dtype": str(parts.word.dtype),
        "fix": found.fix,
    }
    return Report(
        check="diagnose",
        model=model.name,
        passed=passed,
        comparisons=comparisons,
        first_divergence=None
        if outputs_match
        else Divergence(0, "embeddings", "embeddings", found.fix["advice"]),
        details=details,
        notes=list(model.notes),
    )


def _check_width(embeds: np.ndarray, parts: EmbeddingParts) -> None:
    if embeds.shape[-1] != parts.width:
        raise TfparityError(
            f"--embeds is {embeds.shape[-1]} wide, but the model's word embeddings are "
            f"{parts.width} wide: these embeddings are not for this model (or not "
            "embeddings at all, e.g. a pooled output or a projection)."
        )


def _compare_outputs(
    model: TFSide, inputs: DiagnoseInputs, options: DiagnoseOptions
) -> tuple[Trace, list[Comparison]]:
    """The ids run (its hidden states are the diagnosis's candidates too), and every
    output of the embeds path against it (padding excluded)."""
    batch = inputs.batch
    dtype = model.word_embeddings().dtype.as_numpy_dtype  # run in the model's own dtype
    reference = model.run(batch)
    actual = model.run(batch, inputs_embeds=inputs.embeds.astype(dtype))
    comparisons = compare_output_batches(
        [actual], [reference], masks=[batch.attention_mask], tolerance=options.tolerance
    )
    return reference, comparisons
