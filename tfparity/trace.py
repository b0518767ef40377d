"""Trace: a model run's named arrays in canonical order (numpy only).

Order: ``hidden_states[0]`` (embedding output), ``hidden_states[1..N]`` (the output
of encoder layer k-1), a seq2seq model's ``decoder_hidden_states[k]`` (its encoder's are
the ``hidden_states``), then the model's outputs (``last_hidden_state``,
``pooler_output``, ``logits``), then any sub-layer taps. Caches (``past_key_values``,
``mems``) are left out: they repeat hidden states in another layout.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def to_numpy(x: Any) -> np.ndarray:
    """Convert a TF/torch/numpy tensor to numpy without importing a framework."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            return x.float().numpy()
        return x.numpy()
    if hasattr(x, "numpy"):  # tf
        # TF's __array__ reads a CPU tensor in place (read-only); .numpy() would copy it.
        return np.asarray(x) if hasattr(x, "__array__") else np.asarray(x.numpy())
    return np.asarray(x)


def flatten(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """Named leaves of a nested output, in order: ``hidden_states[3]``, ``past[0].key``.

    Mappings (including Hugging Face ``ModelOutput``) give ``name`` or ``prefix.name``;
    sequences give ``prefix[i]``; ``None`` leaves are dropped.
    """
    out: dict[str, np.ndarray] = {}
    if tree is None:
        return out
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(tree, (tuple, list)):
        for i, value in enumerate(tree):
            out.update(flatten(value, f"{prefix}[{i}]"))
    else:
        out[prefix] = to_numpy(tree)
    return out


EMBEDDINGS = "embeddings"  # the layer whose output hidden state 0 is
_CACHES = ("past_key_values", "mems", "attentions", "cross_attentions")
_HIDDEN = re.compile(r"^hidden_states\[(\d+)\]$")
_DECODER = re.compile(r"^decoder_hidden_states\[(\d+)\]$")
# An encoder-decoder's encoder outputs go by the names its encoder alone gives them
# (``hidden_states[k]``, ``last_hidden_state``), so that its layers are judged and
# localised as an encoder model's are; its decoder's keep theirs.
_ENCODER = re.compile(r"^encoder_(?=hidden_states\[|last_hidden_state$)")


@dataclass
class Trace(Mapping):
    """Named numpy arrays from one run, in canonical order."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_output(cls, output: Mapping[str, Any]) -> Trace:
        # Caches are dropped before conversion: a DynamicCache of bf16 tensors has no
        # numpy form (numpy has no bfloat16), and caches are never compared.
        kept = {k: v for k, v in dict(output).items() if not str(k).startswith(_CACHES)}
        flat = {
            _ENCODER.sub("", k): v for k, v in flatten(kept).items() if not k.startswith(_CACHES)
        }
        hidden = sorted((k for k in flat if _HIDDEN.match(k)), key=hidden_state_index)
        decoder = sorted((k for k in flat if _DECODER.match(k)), key=decoder_state_index)
        rest = [k for k in flat if k not in hidden and k not in decoder]
        return cls({k: flat[k] for k in hidden + decoder + rest})

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)

    @property
    def hidden_states(self) -> list[np.ndarray]:
        return [v for k, v in self.arrays.items() if _HIDDEN.match(k)]


def hidden_state_index(name: str) -> int | None:
    """``hidden_states[3]`` -> 3; any other name -> None."""
    m = _HIDDEN.match(name)
    return int(m.group(1)) if m else None


def decoder_state_index(name: str) -> int | None:
    """``decoder_hidden_states[1]`` -> 1 (a seq2seq decoder's); any other name -> None."""
    m = _DECODER.match(name)
    return int(m.group(1)) if m else None


def layer_of(hidden_state: int) -> int | str:
    """The layer whose output hidden state ``hidden_state`` is: ``hidden_states[0]`` is
    the embeddings' output (``"embeddings"``), ``hidden_states[k]`` layer ``k - 1``'s; a
    decoder's ``decoder_hidden_states`` likewise. The one place this is written."""
    return EMBEDDINGS if hidden_state == 0 else hidden_state - 1


def hidden_state_of(layer: int | str) -> int:
    """The hidden state that ``layer`` outputs (:func:`layer_of`'s inverse)."""
    return 0 if layer == EMBEDDINGS else int(layer) + 1


def layer_text(hidden_state: int, embeddings: str = "the embeddings", layer: str = "layer") -> str:
    """What a text calls the layer that outputs ``hidden_state``: ``embeddings`` for the
    embeddings, else ``"<layer> <index>"`` (``layer 2``, ``decoder layer 2``)."""
    found = layer_of(hidden_state)
    return embeddings if found == EMBEDDINGS else f"{layer} {found}"
