"""Greedy generation on the PyTorch side: PyTorch ``generate`` (the reference's own
KV-cache path), with the same settings as the TF side (:mod:`.greedy`), and each step's
logits recomputed without a cache in float32 and float64 (the referee)."""

from __future__ import annotations

import numpy as np

from ..inputs import Batch
from .greedy import GreedyRun, fed_sequence, greedy_config
from .pt_model import PTModel
from .runtime import import_torch


def pt_generate(model: PTModel, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
    """PyTorch ``generate``, greedy, ``new_tokens`` steps from ``prompt`` (one sequence,
    no padding), with each step's raw logits; the end-of-sequence token does not stop it."""
    torch = import_torch()
    ids = torch.from_numpy(np.asarray(prompt, np.int64)[None])
    config = greedy_config(new_tokens, model.config.pad_token_id)
    with torch.no_grad():
        out = model.model.generate(
            ids, attention_mask=torch.ones_like(ids), generation_config=config, eos_token_id=None
        )
    tokens = out.sequences[0, len(prompt) :].numpy()
    logits = np.stack([step[0].float().numpy() for step in out.logits])
    return GreedyRun(tokens, logits)


def step_logits(
    model: PTModel, prompt: np.ndarray, tokens: np.ndarray, *, float64: bool = False
) -> np.ndarray:
    """The logits that chose each of ``tokens`` after ``prompt``, recomputed without a
    cache (one call over the prompt and the tokens fed; see
    :func:`.generation_tf.step_logits`), in float32 or float64: [len(tokens), vocab]."""
    ids = fed_sequence(prompt, tokens)
    trace = model.run(Batch(ids, np.ones_like(ids)), float64=float64)
    return np.asarray(trace["logits"])[0, len(prompt) - 1 :]
