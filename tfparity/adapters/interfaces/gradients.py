"""What the gradients check differentiates, and what a gradient run returns (numpy only).

The scalar is defined once here and computed by each framework's adapter
(:mod:`..hf_tf.gradients`, :mod:`..reference.gradients`) from the same seeded targets, so that
TensorFlow, PyTorch and PyTorch in float64 differentiate the same function:

- a model with a task head: the head's loss against seeded labels, one term per output
  named ``*logits`` (cross-entropy; squared error for a single-output regression head),
  token-level outputs over the attention mask's tokens only;
- a base model: a seeded random projection of the last hidden state over the mask's
  tokens, ``sum(h * P) / tokens`` (a plain sum of outputs would give every token the
  same upstream gradient and hide position-dependent faults).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

TermKind = Literal["project", "classes", "regress"]
HEAD_SUFFIX = "logits"


@dataclass(frozen=True)
class Term:
    """One part of the scalar: ``output`` against ``target``; ``mask`` ([batch, seq]
    float, 1 = a real token) where the output is per token, else None."""

    output: str
    kind: TermKind
    target: np.ndarray
    mask: np.ndarray | None


@dataclass(frozen=True)
class Objective:
    """The seeded scalar of one batch (``seed`` and the batch's ``index``)."""

    seed: int = 0
    index: int = 0

    def terms(self, shapes: Mapping[str, Sequence[int]], mask: np.ndarray) -> list[Term]:
        """The terms for a run whose outputs have these ``shapes`` (its head's logits,
        else the last hidden state)."""
        heads = [name for name in shapes if name.endswith(HEAD_SUFFIX)]
        if not heads:
            name = "last_hidden_state"
            if name not in shapes:
                raise KeyError(
                    f"the run has neither logits nor a last_hidden_state: {list(shapes)}"
                )
            target = self._rng(name).standard_normal(tuple(shapes[name])).astype(np.float32)
            return [Term(name, "project", target, _token_mask(mask, shapes[name]))]
        return [self._head_term(name, tuple(shapes[name]), mask) for name in heads]

    @staticmethod
    def describe(terms: Sequence[Term]) -> str:
        """The scalar in words, for reports."""
        if terms and terms[0].kind == "project":
            return "a seeded random projection of last_hidden_state (mean over tokens)"
        kinds = {"classes": "cross-entropy", "regress": "squared error"}
        parts = [f"{kinds[t.kind]} of {t.output}" for t in terms]
        return f"the head's loss on seeded labels: {', '.join(parts)}"

    def _head_term(self, name: str, shape: tuple[int, ...], mask: np.ndarray) -> Term:
        rng, classes = self._rng(name), shape[-1]
        if classes == 1:  # a regression head: squared error against seeded targets
            target = rng.standard_normal(shape).astype(np.float32)
            return Term(name, "regress", target, _token_mask(mask, shape))
        labels = rng.integers(0, classes, size=shape[:-1]).astype(np.int64)
        return Term(name, "classes", labels, _token_mask(mask, shape[:-1] + (1,)))

    def _rng(self, name: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.index, zlib.crc32(name.encode())])


def _token_mask(mask: np.ndarray, shape: Sequence[int]) -> np.ndarray | None:
    """The attention mask as float weights where the output is per token ([batch, seq,
    ...] with ``mask``'s first two axes), else None."""
    if len(shape) >= 3 and tuple(shape[:2]) == np.shape(mask):
        return np.asarray(mask, np.float32)
    return None


@dataclass
class GradientRun:
    """One batch's forward and backward pass on one side.

    ``forward``: the run's hidden states (``hidden_states[k]``); ``hidden``: the
    gradient with respect to each of them (None: the scalar does not depend on it);
    ``inputs_embeds``: with respect to the embeddings fed in (the gathered word
    embeddings; None when none were); ``weights``: with respect to every trainable
    weight, by PyTorch name in PyTorch's layout where the side knows it (densified
    where TF gives ``IndexedSlices``; None: not on the gradient path);
    ``word_embeddings``: the name of the word-embedding matrix in ``weights``.
    """

    loss: float
    forward: dict[str, np.ndarray] = field(default_factory=dict)
    hidden: dict[str, np.ndarray | None] = field(default_factory=dict)
    inputs_embeds: np.ndarray | None = None
    weights: dict[str, np.ndarray | None] = field(default_factory=dict)
    word_embeddings: str | None = None
    scalar: str = ""  # the scalar in words (Objective.describe)
    # Rows a side's embedding gives no gradient by design, by weight name: PyTorch's
    # ``nn.Embedding(padding_idx=N)`` row N (TensorFlow's gather has no such rule).
    frozen_rows: dict[str, int] = field(default_factory=dict)
