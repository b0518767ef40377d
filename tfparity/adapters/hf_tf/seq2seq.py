"""Greedy generation on a Hugging Face TF seq2seq LM (T5, mT5), as a
:class:`~..interfaces.sides.Generator`: the prompt feeds the encoder, the decoder starts from
the decoder start token, and its tokens are the ones judged.

- **The tokens**: HF TF ``generate`` (the decoder's own KV cache; the encoder runs once),
  greedy, no stop at the end token, each step's raw logits.
- **The recomputation**: one call of the model, the encoder on the prompt and the
  decoder fed ``[start] + tokens[:-1]`` without a cache; the decoder's causal mask makes
  position t's logits those of a run that stopped at t.
- **The start from embeddings**: HF TF ``generate`` takes the encoder's
  ``inputs_embeds`` for an encoder-decoder (a causal LM's it refuses), so it runs on the
  prompt's embeddings gathered on the Keras side, on the same cached path as the ids.
- **Localisation**: the decoder has no sub-layer taps here, so the cross-check runs the
  encoder on the prompt (the TF encoder class with the model's weights, against the
  reference's encoder); the decoder is not localised.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...errors import TfparityError
from ..interfaces.greedy import GreedyRun, decoder_fed, decoder_start, greedy_config
from ..interfaces.sides import ForwardPass
from ..runtime.imports import import_tf
from .generation import HFGenerator, no_end_token


@dataclass
class Seq2SeqGenerator(HFGenerator):
    """Greedy generation on a Hugging Face TF encoder-decoder LM (a ``TFModel`` side
    whose head is ``seq2seq-lm``); the cache and the ``inputs_embeds`` facts are read
    from the model's call as :class:`HFGenerator` reads them."""

    def __post_init__(self) -> None:
        self.decoding = (
            f"seq2seq: the prompt feeds the encoder; the new tokens are the decoder's, from "
            f"its start token (id {self.start})"
        )
        self.notes.append(
            f"{type(self.side.model).__name__}: the encoder reads the prompt once; the "
            "decoder decodes greedily from its start token on its own KV cache (HF TF "
            "generate against PyTorch generate); the teacher-forced and recomputed logits "
            "are one call with the decoder fed the start token and the tokens."
        )

    @property
    def start(self) -> int:
        """The decoder start token (``config.decoder_start_token_id``)."""
        start = decoder_start(self.side.config)
        if start is None:  # TFModel.generator hands this out for seq2seq heads only
            raise TfparityError(f"{self.side.name}'s config is not an encoder-decoder's.")
        return start

    def generate(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """HF TF ``generate`` from the prompt's ids: the decoder's ``new_tokens`` tokens
        (its start token dropped) and each step's raw logits."""
        tf = import_tf()
        ids = tf.constant(np.asarray(prompt, np.int32)[None])
        return self._decoded(input_ids=ids, attention_mask=tf.ones_like(ids), n=new_tokens)

    def generate_from_embeds(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """HF TF ``generate`` with the encoder fed the prompt's word embeddings, gathered
        on the Keras side, instead of its ids (the same cached decoder path)."""
        embeds = self.side.gather(np.asarray(prompt, np.int32)[None])
        mask = np.ones((1, len(prompt)), np.int32)
        return self._decoded(inputs_embeds=embeds, attention_mask=mask, n=new_tokens)

    def _decoded(self, *, n: int, **encoder_inputs: Any) -> GreedyRun:
        hf = self.side.model
        with no_end_token(hf):
            out = hf.generate(
                **encoder_inputs, generation_config=greedy_config(n, self.side.pad_token_id)
            )
        tokens = out.sequences.numpy()[0, 1:]  # the decoder's sequence opens with its start
        logits = np.stack([np.asarray(s.numpy()[0]) for s in out.scores])
        return GreedyRun(tokens, logits, cached=self.keeps_cache)

    def step_logits(self, prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The logits that chose each of ``tokens``, recomputed without a cache: the
        encoder on the prompt, the decoder fed its start token and the tokens but the
        last, in one call. [len(tokens), vocab]."""
        ids = np.asarray(prompt, np.int32)[None]
        out = self.side.model(
            ids,
            attention_mask=np.ones_like(ids),
            decoder_input_ids=decoder_fed(self.start, tokens),
            use_cache=False,
            training=False,
        )
        return np.asarray(out.logits[0].numpy())

    def forward_pass(self, reference: Any, prompt: np.ndarray, tokens: np.ndarray) -> ForwardPass:
        """The encoder on the prompt: the TF encoder class holding the model's weights
        against the reference's encoder (the decoder has no taps to localise with)."""
        ids = np.asarray(prompt, np.int32)[None]
        fed = decoder_fed(self.start, tokens)

        def states() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
            tf_states = self.decoder_states(ids, fed)
            pt = [reference.decoder_states(ids, fed, float64=f) for f in (False, True)]
            return list(zip(tf_states, *pt, strict=True))

        return ForwardPass(
            encoder_side(self.side),
            reference.encoder(),
            ids,
            "the encoder on the prompt",
            "decoder",
            "the difference is in the decoder or the LM head",
            beyond_states=states,
        )

    def decoder_states(self, ids: np.ndarray, fed: np.ndarray) -> list[np.ndarray]:
        """The decoder's hidden states, teacher-forced as :meth:`step_logits` runs it."""
        out = self.side.model(
            ids,
            attention_mask=np.ones_like(ids),
            decoder_input_ids=fed,
            use_cache=False,
            output_hidden_states=True,
            training=False,
        )
        return [np.asarray(h.numpy()) for h in out.decoder_hidden_states]


def encoder_side(side: Any) -> Any:
    """``side`` (a seq2seq ``TFModel``) as its encoder alone: the architecture's encoder
    class (``TFT5EncoderModel``), built and given the model's weights by path, so the
    cross-check runs the encoder the other checks run."""
    from .loading import build, copy_matching, tf_model_class

    encoder = tf_model_class(side.config).from_config(side.config)
    build(encoder)
    copy_matching(side.model, encoder)
    return replace(side, name=f"{side.name}, its encoder", model=encoder, notes=[])
