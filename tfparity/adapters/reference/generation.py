"""Greedy generation on the PyTorch side: PyTorch ``generate`` (the reference's own
KV-cache path), with the same settings as the TF side (:mod:`..interfaces.greedy`), and each step's
logits recomputed without a cache in float32 and float64 (the referee).

A causal LM continues the prompt; a seq2seq model (T5) reads the prompt with its
encoder and decodes from its decoder start token (:func:`..interfaces.greedy.decoder_start`, a fact
of the config), so its tokens are the decoder's.

These are the live reference's methods (:meth:`~.pt_model.PTModel.greedy`, ``step_logits``,
``encoder``); ``model`` is that :class:`~.pt_model.PTModel` (typed ``Any``: it imports this
module).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import TfparityError
from ...inputs import Batch
from ..interfaces.greedy import GreedyRun, decoder_fed, decoder_start, fed_sequence, greedy_config
from ..runtime.imports import import_torch, import_transformers


def pt_generate(model: Any, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
    """PyTorch ``generate``, greedy, ``new_tokens`` steps from ``prompt`` (one sequence,
    no padding), with each step's raw logits; the end-of-sequence token does not stop it."""
    torch = import_torch()
    ids = torch.from_numpy(np.asarray(prompt, np.int64)[None])
    config = greedy_config(new_tokens, model.config.pad_token_id)
    with torch.no_grad():
        out = model.model.generate(
            ids, attention_mask=torch.ones_like(ids), generation_config=config, eos_token_id=None
        )
    # a causal LM's sequence holds the prompt first; a seq2seq decoder's, its start token
    first = len(prompt) if decoder_start(model.config) is None else 1
    tokens = out.sequences[0, first:].numpy()
    logits = np.stack([step[0].float().numpy() for step in out.logits])
    return GreedyRun(tokens, logits)


def step_logits(
    model: Any, prompt: np.ndarray, tokens: np.ndarray, *, float64: bool = False
) -> np.ndarray:
    """The logits that chose each of ``tokens`` after ``prompt``, recomputed without a
    cache (one call over the prompt and the tokens fed; see
    :func:`..hf_tf.generation.step_logits`; a seq2seq model: the encoder on the prompt, the
    decoder fed its start token and the tokens), in float32 or float64: [len(tokens), vocab]."""
    start = decoder_start(model.config)
    if start is not None:
        fed = decoder_fed(start, tokens)
        return model.decoder_logits(np.asarray(prompt)[None], fed, float64=float64)[0]
    ids = fed_sequence(prompt, tokens)
    trace = model.run(Batch(ids, np.ones_like(ids)), float64=float64)
    return np.asarray(trace["logits"])[0, len(prompt) - 1 :]


def encoder_model(model: Any) -> Any:
    """A seq2seq reference's encoder alone (``T5EncoderModel``: the class the other
    checks run), as a PyTorch model holding its weights: what the cross-check compares a
    TF encoder with."""
    from ...architectures import for_config

    cls = getattr(import_transformers(), for_config(model.config).pt_class)
    encoder = cls._from_config(model.config, attn_implementation="eager")
    missing, _ = encoder.load_state_dict(model.model.state_dict(), strict=False)
    if missing:
        raise TfparityError(
            f"{model.name}'s weights do not fill its encoder {cls.__name__} (missing: "
            f"{', '.join(missing[:4])})."
        )
    return encoder
