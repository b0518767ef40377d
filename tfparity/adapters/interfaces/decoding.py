"""Greedy decoding written against a side's declared interface (``run``, ``gather``),
so every TF side that runs a causal LM shares it (Hugging Face TF, keras-hub): the
logits recomputed without a cache, the loop from gathered embeddings, and the
teacher-forced forward pass that localises a generation's defect."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...inputs import Batch
from .greedy import GreedyRun, fed_sequence
from .sides import ForwardPass

CAUSAL_DECODING = "causal LM: the new tokens continue the prompt"


def teacher_forced_pass(
    side: Any, reference: Any, prompt: np.ndarray, tokens: np.ndarray
) -> ForwardPass:
    """A causal LM's forward pass over the prompt and ``tokens`` fed: one pass holds every
    step's logits, so the cross-check of it names the layer a defect starts in."""
    return ForwardPass(
        side,
        reference,
        fed_sequence(prompt, tokens),
        "the teacher-forced sequence",
        "head",
        "the difference is in generation itself, not in one forward pass",
    )


def recomputed_logits(side: Any, prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """A side's logits that chose each of ``tokens`` after ``prompt``, from one full
    forward pass (its ``run``) without a cache: [len(tokens), vocab]."""
    ids = fed_sequence(prompt, tokens)
    trace = side.run(Batch(ids, np.ones_like(ids)))
    return np.asarray(trace["logits"])[0, len(prompt) - 1 :]


def embeds_loop(side: Any, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
    """Greedy decoding without a cache from gathered embeddings: every step runs the
    side's ``inputs_embeds`` path on the embeddings of the prompt and the tokens so far
    (gathered on the Keras side), and takes the last position's logits."""
    sequence, logits = [int(t) for t in prompt], []
    for _ in range(new_tokens):
        ids = np.array([sequence], np.int32)
        trace = side.run(Batch(ids, np.ones_like(ids)), side.gather(ids))
        logits.append(np.asarray(trace["logits"])[0, -1])
        sequence.append(int(np.argmax(logits[-1])))
    return GreedyRun(np.array(sequence[len(prompt) :]), np.stack(logits), cached=False)
