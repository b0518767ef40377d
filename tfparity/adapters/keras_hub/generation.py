"""Greedy generation on a keras-hub causal LM, as a :class:`~..interfaces.sides.Generator`:
the tokens from keras-hub's own ``CausalLM.generate`` with its greedy sampler, and the
logits each step chose from as that sampler received them, so the cached path judged is
the one ``generate`` runs (``generate_step``: ``call_with_cache`` on the task's KV
cache), not a loop of tfparity's.

``generate`` runs eagerly here (keras-hub models run eagerly in float32, see
:meth:`KerasHubModel.executed`), so the sampler sees each step's logits as numbers.
Nothing stops at an end token (``stop_token_ids=None``): every prompt gets its N tokens,
as on the PyTorch side (:mod:`..interfaces.greedy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..interfaces.decoding import (
    CAUSAL_DECODING,
    embeds_loop,
    recomputed_logits,
    teacher_forced_pass,
)
from ..interfaces.greedy import GreedyRun
from ..interfaces.sides import ForwardPass
from .side import import_keras_hub


@dataclass
class KerasHubGenerator:
    """Greedy generation on a keras-hub causal-LM side (``side.task``, a
    ``keras_hub.models.CausalLM`` built around the side's backbone)."""

    side: Any
    notes: list[str] = field(default_factory=list)
    keeps_cache: bool = True  # generate_step decodes on call_with_cache's KV cache
    # the task's graph runs from gathered embeddings (the lookup's output replaced);
    # call_with_cache takes token ids only, so that start recomputes every step
    embeds_refusal: str | None = None
    decoding: str = CAUSAL_DECODING
    _sampler: Any = None

    def __post_init__(self) -> None:
        name = type(self.side.task).__name__
        self.notes.append(
            f"keras-hub: the tokens are {name}.generate's with a greedy sampler "
            "(keras_hub.samplers.GreedySampler, run eagerly, stop_token_ids=None), and its "
            "cached step logits are those the sampler chose from (call_with_cache on the "
            "task's KV cache); the recomputation is the task's full forward pass. The start "
            "from inputs_embeds recomputes every step (call_with_cache takes token ids only)."
        )

    def generate(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """``CausalLM.generate`` on the prompt padded with ``new_tokens`` free positions
        (keras-hub decodes into the padding), greedy, with each step's logits."""
        sampler = self._recording()
        n = len(prompt)
        ids = np.zeros((1, n + new_tokens), np.int32)
        ids[0, :n] = prompt
        mask = (np.arange(n + new_tokens) < n).astype(np.int32)[None]
        out = self.side.task.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
        tokens = np.asarray(out["token_ids"])[0, n:]
        logits = np.stack([np.asarray(step, np.float32)[0] for step in sampler.steps])
        return GreedyRun(tokens, logits, cached=True)

    def step_logits(self, prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The task's logits for each of ``tokens``, from one full forward pass."""
        return recomputed_logits(self.side, prompt, tokens)

    def forward_pass(self, reference: Any, prompt: np.ndarray, tokens: np.ndarray) -> ForwardPass:
        """The teacher-forced sequence on the task."""
        return teacher_forced_pass(self.side, reference, prompt, tokens)

    def generate_from_embeds(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """Greedy decoding from the embeddings gathered from the token embedding matrix,
        each step on the task's graph with the lookup's output replaced (no cache)."""
        return embeds_loop(self.side, np.asarray(prompt, np.int32), new_tokens)

    def _recording(self) -> Any:
        """The task compiled once with a recording greedy sampler, run eagerly; its
        record emptied for the next call."""
        if self._sampler is None:
            self._sampler = recording_sampler()
            self.side.task.compile(sampler=self._sampler, run_eagerly=True)
        self._sampler.steps.clear()
        return self._sampler


def recording_sampler() -> Any:
    """keras-hub's ``GreedySampler`` (argmax of the softmax of the logits), keeping the
    logits of each step as it receives them (``steps``)."""
    keras_hub = import_keras_hub()

    class RecordingGreedySampler(keras_hub.samplers.GreedySampler):
        def __init__(self) -> None:
            super().__init__()
            self.steps: list[np.ndarray] = []

        def compute_probabilities(self, logits: Any) -> Any:
            self.steps.append(np.asarray(logits))  # eager: the numbers the step chose from
            return super().compute_probabilities(logits)

    return RecordingGreedySampler()
