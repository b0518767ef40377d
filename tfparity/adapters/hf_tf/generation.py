"""Greedy generation on a Hugging Face TF side, as a :class:`~..interfaces.sides.Generator`:
HF TF ``generate`` (the port's own KV-cache path), and tfparity's own greedy loop over
the model's call started from ``inputs_embeds``, which HF TF ``generate`` refuses
("doesn't have its forwarding implemented", docs/design.md).

What a model's call accepts is read from its signature, as :meth:`TFModel.call_kwargs`
does: a model whose call takes no ``past_key_values`` keeps no KV cache (OpenAI GPT), so
its generation recomputes every step, and the loop from embeddings does the same.

The side is held by its declared interface (``model``, ``gather``, ``run``,
``pad_token_id``), never imported from :mod:`.tf_model`, which hands these out
(:meth:`TFModel.generator`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..interfaces.decoding import (
    CAUSAL_DECODING,
    embeds_loop,
    recomputed_logits,
    teacher_forced_pass,
)
from ..interfaces.greedy import GreedyRun, SameStart, greedy_config
from ..interfaces.sides import ForwardPass
from ..runtime.imports import import_tf


@dataclass
class HFGenerator:
    """Greedy generation on a Hugging Face TF causal LM (a ``TFModel`` side); an
    encoder-decoder's is :class:`~.seq2seq.Seq2SeqGenerator`, which extends
    it."""

    side: Any
    notes: list[str] = field(default_factory=list)
    decoding: str = CAUSAL_DECODING

    @property
    def keeps_cache(self) -> bool:
        """Whether the model's call takes and returns a KV cache (``past_key_values``)."""
        accepted = inspect.signature(self.side.model.call).parameters
        return "past_key_values" in accepted and "use_cache" in accepted

    @property
    def embeds_refusal(self) -> str | None:
        """Why generation cannot start from ``inputs_embeds`` here; None where it can."""
        if "inputs_embeds" not in inspect.signature(self.side.model.call).parameters:
            return f"{type(self.side.model).__name__}'s call takes no inputs_embeds"
        return None

    def generate(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """HF TF ``generate``, greedy, ``new_tokens`` steps from ``prompt`` (one sequence,
        no padding); the step scores are the raw logits (no logits processor runs)."""
        tf = import_tf()
        hf = self.side.model
        ids = tf.constant(np.asarray(prompt, np.int32)[None])
        with no_end_token(hf):
            out = hf.generate(
                ids,
                attention_mask=tf.ones_like(ids),
                generation_config=greedy_config(new_tokens, self.side.pad_token_id),
            )
        tokens = out.sequences.numpy()[0, len(prompt) :]
        logits = np.stack([np.asarray(s.numpy()[0]) for s in out.scores])
        return GreedyRun(tokens, logits, cached=self.keeps_cache)

    def step_logits(self, prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The logits that chose each of ``tokens`` after ``prompt``, recomputed without a
        cache: one call over the prompt and the tokens fed (the last token is fed to
        nothing), where the causal mask makes position t's logits those of a run that
        stopped at t. [len(tokens), vocab]."""
        return recomputed_logits(self.side, prompt, tokens)

    def forward_pass(self, reference: Any, prompt: np.ndarray, tokens: np.ndarray) -> ForwardPass:
        """The teacher-forced sequence (the prompt and ``tokens`` fed) on the model."""
        return teacher_forced_pass(self.side, reference, prompt, tokens)

    def generate_from_embeds(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun | SameStart:
        """tfparity's greedy loop, started from the prompt's word embeddings gathered on
        the Keras side (with the ids path's own changes, :meth:`TFModel.gather`), then fed
        each chosen id on the KV cache; where the model keeps no cache, every step runs
        on the embeddings of the prompt and the tokens so far. With a cache, only the
        prefill reads the embeddings: where it leaves logits and cache bitwise as the ids
        prefill does, the rest is the ids path's decoding (a :class:`SameStart`)."""
        prompt = np.asarray(prompt, np.int32)
        if not self.keeps_cache:
            return embeds_loop(self.side, prompt, new_tokens)
        start = self._prefill(prompt, embeds=True)
        same = _same_state(start, self._prefill(prompt, embeds=False))
        return same if same is not None else self._cached_loop(start, prompt, new_tokens)

    def _prefill(self, prompt: np.ndarray, embeds: bool) -> Any:
        """The model's call over the whole prompt, from gathered embeddings or from ids,
        keeping its KV cache."""
        mask = np.ones((1, len(prompt)), np.int32)
        if embeds:
            fed = {"input_ids": None, "inputs_embeds": self.side.gather(prompt[None])}
        else:
            fed = {"input_ids": prompt[None]}
        return self.side.model(**fed, attention_mask=mask, use_cache=True, training=False)

    def _cached_loop(self, out: Any, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        hf = self.side.model
        tokens, logits = [], []
        for step in range(new_tokens):
            logits.append(np.asarray(out.logits[0, -1].numpy()))
            tokens.append(int(np.argmax(logits[-1])))
            if step + 1 == new_tokens:
                break
            mask = np.ones((1, len(prompt) + step + 1), np.int32)
            out = hf(
                np.array([[tokens[-1]]], np.int32),
                attention_mask=mask,
                past_key_values=out.past_key_values,
                use_cache=True,
                training=False,
            )
        return GreedyRun(np.array(tokens), np.stack(logits), cached=True)


def _same_state(embeds: Any, ids: Any) -> SameStart | None:
    """A SameStart where both prefills' logits and every KV-cache tensor are bitwise
    equal; None where anything differs (the generation from embeddings then runs)."""
    tf = import_tf()
    cache_a, cache_b = (tf.nest.flatten(o.past_key_values) for o in (embeds, ids))
    pairs = [(embeds.logits, ids.logits), *zip(cache_a, cache_b, strict=False)]
    if len(cache_a) != len(cache_b) or not cache_a:
        return None
    for a, b in pairs:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or not np.array_equal(a, b):
            return None
    logits = np.asarray(embeds.logits[0, -1])
    return SameStart(logits, np.asarray(ids.logits[0, -1]), len(cache_a))


@contextlib.contextmanager
def no_end_token(hf_model: Any) -> Iterator[None]:
    """The model's generation config without an end-of-sequence token for one call: TF
    greedy search takes the model's own when the call's is None, and would stop early."""
    config = hf_model.generation_config
    saved = config.eos_token_id
    config.eos_token_id = None
    try:
        yield
    finally:
        config.eos_token_id = saved
