"""Greedy decoding on either side: the record both sides return, and the generation
settings both use, so that HF TF ``generate`` and PyTorch ``generate`` decode alike.

Greedy, no sampling, no beams, no logits processors (the step logits are then the raw
logits), and the end-of-sequence token does not stop decoding: every prompt gets its N
new tokens on both sides, so step k means the same thing on both.

Two kinds of decoder: a causal LM continues the prompt (it is fed the prompt and the
tokens so far); a seq2seq model's encoder reads the prompt and its decoder starts from
the decoder start token (it is fed that token and the tokens so far).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class GreedyRun:
    """One prompt decoded greedily: ``tokens`` [N] and the logits each step chose from
    ``logits`` [N, vocab] (float32, as the side computed them). ``cached``: whether the
    steps after the first ran on a KV cache (False where the model keeps none)."""

    tokens: np.ndarray
    logits: np.ndarray
    cached: bool = True


@dataclass(frozen=True)
class SameStart:
    """The start from ``inputs_embeds`` left the decoder in the ids start's very state:
    the prefill's logits and every KV-cache tensor are bitwise equal. Every later step
    feeds token ids on that cache, so the generation from embeddings is the ids path's
    (it is not decoded a second time). ``logits``/``ids_logits``: the prefill's last
    position from each start [vocab]; ``cache_tensors``: how many cache tensors matched."""

    logits: np.ndarray
    ids_logits: np.ndarray
    cache_tensors: int


def greedy_config(new_tokens: int, pad_token_id: int | None) -> Any:
    """transformers' GenerationConfig for greedy decoding of exactly ``new_tokens``
    tokens, returning each step's scores (TF) and raw logits (PyTorch)."""
    from ..runtime.imports import import_transformers

    t = import_transformers()
    return t.GenerationConfig(
        do_sample=False,
        num_beams=1,
        max_new_tokens=new_tokens,
        pad_token_id=0 if pad_token_id is None else pad_token_id,
        output_scores=True,
        output_logits=True,
        return_dict_in_generate=True,
    )


def fed_sequence(prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """The ids a decoder is fed to choose ``tokens`` after ``prompt``: the prompt and
    every token but the last, as one int32 row [1, len(prompt) + len(tokens) - 1]."""
    return np.concatenate([np.asarray(prompt), np.asarray(tokens)[:-1]]).astype(np.int32)[None]


def decoder_start(config: Any) -> int | None:
    """The token a seq2seq model's decoder starts from (``config.decoder_start_token_id``);
    None for a causal LM, whose decoder continues the prompt."""
    if not config.is_encoder_decoder:
        return None
    start = config.decoder_start_token_id
    return int(config.pad_token_id if start is None else start)


def decoder_fed(start: int, tokens: np.ndarray) -> np.ndarray:
    """The ids a seq2seq decoder is fed to choose ``tokens``: the start token and every
    token but the last, as one int32 row [1, len(tokens)]."""
    return np.concatenate([[start], np.asarray(tokens)[:-1]]).astype(np.int32)[None]


def teacher_forced_decoder(config: Any, input_ids: np.ndarray, attention_mask: np.ndarray) -> dict:
    """A seq2seq model's decoder inputs for a batch, teacher-forced on the batch's own
    ids (``tfparity crosscheck``): each row's decoder is fed its start token and its ids
    but the last, at the positions its attention mask keeps (either padding side), so the
    decoder's positions line up with the encoder's and one mask judges both. Empty for a
    model without a decoder start (a causal LM, an encoder)."""
    start = decoder_start(config) if getattr(config, "is_encoder_decoder", False) else None
    if start is None:
        return {}
    ids, mask = np.asarray(input_ids), np.asarray(attention_mask, bool)
    fed = np.full_like(ids, config.pad_token_id or 0)
    for row in range(ids.shape[0]):
        kept = ids[row][mask[row]]
        if kept.size:
            fed[row][mask[row]] = np.concatenate([[start], kept[:-1]]).astype(ids.dtype)
    return {"decoder_input_ids": fed, "decoder_attention_mask": np.asarray(attention_mask)}
