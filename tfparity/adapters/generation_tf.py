"""Greedy generation on a Hugging Face TF side, as a :class:`~.interfaces.Generator`:
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

from .greedy import GreedyRun, fed_sequence, greedy_config
from .interfaces import ForwardPass
from .runtime import import_tf

CAUSAL_DECODING = "causal LM: the new tokens continue the prompt"


@dataclass
class HFGenerator:
    """Greedy generation on a Hugging Face TF causal LM (a ``TFModel`` side); an
    encoder-decoder's is :class:`~.generation_seq2seq.Seq2SeqGenerator`, which extends
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

    def generate_from_embeds(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """tfparity's greedy loop, started from the prompt's word embeddings gathered on
        the Keras side (with the ids path's own changes, :meth:`TFModel.gather`), then fed
        each chosen id on the KV cache; where the model keeps no cache, every step runs
        on the embeddings of the prompt and the tokens so far."""
        prompt = np.asarray(prompt, np.int32)
        if self.keeps_cache:
            return self._cached_loop(prompt, new_tokens)
        return embeds_loop(self.side, prompt, new_tokens)

    def _cached_loop(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        hf = self.side.model
        embeds = self.side.gather(prompt[None])
        mask = np.ones((1, len(prompt)), np.int32)
        out = hf(None, inputs_embeds=embeds, attention_mask=mask, use_cache=True, training=False)
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
    from ..inputs import Batch

    ids = fed_sequence(prompt, tokens)
    trace = side.run(Batch(ids, np.ones_like(ids)))
    return np.asarray(trace["logits"])[0, len(prompt) - 1 :]


def embeds_loop(side: Any, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
    """Greedy decoding without a cache from gathered embeddings: every step runs the
    side's ``inputs_embeds`` path on the embeddings of the prompt and the tokens so far
    (gathered on the Keras side), and takes the last position's logits."""
    from ..inputs import Batch

    sequence, logits = [int(t) for t in prompt], []
    for _ in range(new_tokens):
        ids = np.array([sequence], np.int32)
        trace = side.run(Batch(ids, np.ones_like(ids)), side.gather(ids))
        logits.append(np.asarray(trace["logits"])[0, -1])
        sequence.append(int(np.argmax(logits[-1])))
    return GreedyRun(np.array(sequence[len(prompt) :]), np.stack(logits), cached=False)
