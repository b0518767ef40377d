"""How a serving signature's tensors map onto tfparity's names (pure Python and numpy).

An exported signature names its tensors as its author chose: Hugging Face's names
(``input_ids``, ``last_hidden_state``), keras-hub's (``token_ids``, ``padding_mask``,
``sequence_output``), TF Hub BERT's (``input_word_ids``, ``input_mask``), or Keras 3's
generated ones (``output_0``). Inputs are mapped by name only: feeding a tensor to the
wrong input would be a silent error. Outputs are mapped by name first, then an unnamed
output by its shape where exactly one reference tensor has that shape (``[batch, seq,
hidden]`` is the last hidden state). What cannot be mapped is a usage error (exit 2)
that lists what the signature has, never a comparison of nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import TfparityError
from ...inputs import Batch

# Signature input name -> the batch field it takes.
INPUT_NAMES: dict[str, str] = {
    "input_ids": "input_ids",
    "token_ids": "input_ids",  # keras-hub
    "input_word_ids": "input_ids",  # TF Hub BERT
    "attention_mask": "attention_mask",
    "padding_mask": "attention_mask",
    "input_mask": "attention_mask",
    "token_type_ids": "token_type_ids",
    "segment_ids": "token_type_ids",
    "input_type_ids": "token_type_ids",
    "position_ids": "position_ids",
    "inputs_embeds": "inputs_embeds",
}
# Signature output name -> the reference's name.
OUTPUT_NAMES: dict[str, str] = {
    "last_hidden_state": "last_hidden_state",
    "sequence_output": "last_hidden_state",  # keras-hub
    "pooler_output": "pooler_output",
    "pooled_output": "pooler_output",  # keras-hub
    "logits": "logits",
    "start_logits": "start_logits",
    "end_logits": "end_logits",
}
_HIDDEN = re.compile(r"^(?:hidden_states?|encoder_outputs?)[_\[]?(\d+)\]?$")
STACKED_HIDDEN = "hidden_states"  # one tensor [layers + 1, batch, seq, hidden]


@dataclass(frozen=True)
class TensorInfo:
    """A signature tensor: its dtype's name and its static shape (None: unknown)."""

    dtype: str
    shape: tuple[int | None, ...]


@dataclass(frozen=True)
class InputMap:
    """Which signature input takes which batch field, in the dtype it declares."""

    fields: dict[str, str]  # signature name -> batch field
    dtypes: dict[str, str]

    @property
    def takes_ids(self) -> bool:
        return "input_ids" in self.fields.values()

    @property
    def takes_embeds(self) -> bool:
        return "inputs_embeds" in self.fields.values()

    def takes(self, batch_field: str) -> bool:
        return batch_field in self.fields.values()

    def feed(self, batch: Batch, inputs_embeds: Any = None) -> dict[str, np.ndarray]:
        """The signature's keyword arguments for ``batch`` (token types default to 0)."""
        values: dict[str, Any] = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "token_type_ids": batch.token_type_ids
            if batch.token_type_ids is not None
            else np.zeros_like(batch.input_ids),
            "position_ids": batch.position_ids,
            "inputs_embeds": None if inputs_embeds is None else np.asarray(inputs_embeds),
        }
        feed = {}
        for name, source in self.fields.items():
            value = values[source]
            if value is None:
                raise TfparityError(
                    f"The signature input '{name}' takes {source}, which this run has none "
                    "of (position ids are given only where the check makes them)."
                )
            feed[name] = np.asarray(value).astype(self.dtypes[name])
        return feed


@dataclass(frozen=True)
class OutputMap:
    """Which signature output is which reference tensor; ``unmapped``: the rest."""

    names: dict[str, str]  # signature name -> reference name (or the stacked form)
    unmapped: tuple[str, ...] = ()
    by_shape: tuple[str, ...] = field(default=())  # those mapped by shape, for a note

    @property
    def has_hidden_states(self) -> bool:
        return any(
            n == STACKED_HIDDEN or n.startswith("hidden_states[") for n in self.names.values()
        )

    def targets(self, reference: list[str]) -> set[str]:
        """The reference names these outputs stand for (a stacked form: every hidden
        state the reference has)."""
        found = {t for t in self.names.values() if t != STACKED_HIDDEN}
        if STACKED_HIDDEN in self.names.values():
            found |= {n for n in reference if n.startswith("hidden_states[")}
        return found

    def arrays(self, outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The run's outputs by the reference's names (a stacked form split per layer)."""
        found: dict[str, np.ndarray] = {}
        for name, target in self.names.items():
            value = np.asarray(outputs[name])
            if target == STACKED_HIDDEN:
                found.update({f"hidden_states[{k}]": v for k, v in enumerate(value)})
            else:
                found[target] = value
        return found


def describe(tensors: Mapping[str, TensorInfo]) -> str:
    """``input_ids int32 [?, ?], ...``: what a signature has, for messages."""
    return ", ".join(
        f"{name} {info.dtype} [{', '.join('?' if d is None else str(d) for d in info.shape)}]"
        for name, info in sorted(tensors.items())
    )


def map_inputs(signature: str, inputs: Mapping[str, TensorInfo]) -> InputMap:
    """Each input by name; an input of no known name cannot be fed: exit 2."""
    unknown = sorted(n for n in inputs if n not in INPUT_NAMES)
    if unknown:
        raise TfparityError(
            f"The signature '{signature}' takes inputs tfparity cannot feed by name "
            f"({', '.join(unknown)}); it has: {describe(inputs)}. Known input names: "
            f"{', '.join(INPUT_NAMES)}."
        )
    fields = {n: INPUT_NAMES[n] for n in inputs}
    mapped = InputMap(fields, {n: info.dtype for n, info in inputs.items()})
    if mapped.takes_ids == mapped.takes_embeds:
        raise TfparityError(
            f"The signature '{signature}' must take token ids (input_ids, token_ids, "
            f"input_word_ids) or inputs_embeds, one of the two; it has: {describe(inputs)}."
        )
    return mapped


def map_outputs(signature: str, outputs: Mapping[str, TensorInfo], config: Any) -> OutputMap:
    """Outputs by name, then unnamed ones by shape (see the module docstring). Exit 2
    when no output maps: a cross-check of it would compare nothing."""
    names: dict[str, str] = {}
    rest = []
    for name, info in outputs.items():
        target = _by_name(name, info)
        if target is None:
            rest.append(name)
        else:
            names[name] = target
    by_shape = []
    for target, rank in (("last_hidden_state", 3), ("pooler_output", 2)):
        if target in names.values():
            continue
        fits = [n for n in rest if _fits(outputs[n], rank, _width(config))]
        if len(fits) == 1:  # one candidate of that shape: no guess between two
            names[fits[0]] = target
            by_shape.append(fits[0])
            rest.remove(fits[0])
    if not names:
        raise TfparityError(
            f"None of the signature '{signature}''s outputs maps onto a Hugging Face "
            f"output (by name: {', '.join(OUTPUT_NAMES)}, hidden_states_<k>; or by shape "
            f"[batch, seq, {_width(config)}]); it has: {describe(outputs)}."
        )
    return OutputMap(names, tuple(sorted(rest)), tuple(by_shape))


def _by_name(name: str, info: TensorInfo) -> str | None:
    if name in OUTPUT_NAMES:
        return OUTPUT_NAMES[name]
    if name == STACKED_HIDDEN and len(info.shape) == 4:
        return STACKED_HIDDEN
    match = _HIDDEN.match(name)
    return f"hidden_states[{int(match.group(1))}]" if match else None


def _width(config: Any) -> int | None:
    return getattr(config, "hidden_size", None)  # an HF config (GPT-2's n_embd aliases it)


def _fits(info: TensorInfo, rank: int, width: int | None) -> bool:
    if len(info.shape) != rank or not info.dtype.startswith(("float", "bfloat", "half")):
        return False
    return width is not None and info.shape[-1] == width
