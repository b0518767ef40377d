"""``generate keras-hub:<SPEC> --backend jax|torch``: greedy generation on a keras-hub
causal LM's task in its worker process (:mod:`.hub_worker`), as a
:class:`~tfparity.adapters.interfaces.sides.Generator`.

The tokens and each step's logits come from the task's own ``generate`` in the worker,
with keras-hub's greedy sampler and no stop token, as on TensorFlow
(:class:`~tfparity.adapters.keras_hub.generation.KerasHubGenerator`), so the generation
check judges it unchanged: its cached steps (``call_with_cache`` on the task's KV cache,
on that backend) against a recomputation without cache (the side's ``run``, one full
pass of the task in the same worker), and, where tokens part by a defect, the
teacher-forced sequence's cross-check names the layer. The start from gathered
``inputs_embeds`` is refused by name: the worker is given token ids only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..interfaces.decoding import CAUSAL_DECODING, recomputed_logits, teacher_forced_pass
from ..interfaces.greedy import GreedyRun
from ..interfaces.sides import ForwardPass


@dataclass
class RemoteGenerator:
    """Greedy generation on ``side`` (a :class:`~.remote_side.RemoteKerasHub` holding a
    CausalLM task), each request answered by its worker."""

    side: Any
    notes: list[str] = field(default_factory=list)
    keeps_cache: bool = True  # generate_step decodes on call_with_cache's KV cache
    embeds_refusal: str | None = None
    decoding: str = CAUSAL_DECODING

    def __post_init__(self) -> None:
        backend, task = self.side.backend, self.side.worker.facts["task"]
        self.embeds_refusal = self.side.inputs_embeds_reason
        self.notes.append(
            f"keras-hub on the {backend} backend: the tokens are {task}.generate's with a "
            "greedy sampler (keras_hub.samplers.GreedySampler, stop_token_ids=None, its "
            "loop driven step by step in Python so each step's logits are read as "
            "numbers) in the worker process, and its cached step logits those the sampler "
            "chose from (call_with_cache on the task's KV cache); the recomputation is the "
            "task's full forward pass in the same process."
        )

    def generate(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """The task's greedy ``generate`` in the worker: the new tokens and the logits
        each cached step chose from."""
        feed = {"prompt": np.asarray(prompt, np.int32), "new_tokens": np.int32(new_tokens)}
        got = self.side.worker.run(feed, kind="generate")
        return GreedyRun(got["tokens"], got["logits"], cached=True)

    def step_logits(self, prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The task's logits for each of ``tokens``, from one full pass in the worker."""
        return recomputed_logits(self.side, prompt, tokens)

    def forward_pass(self, reference: Any, prompt: np.ndarray, tokens: np.ndarray) -> ForwardPass:
        """The teacher-forced sequence on the task (hidden states and logits)."""
        return teacher_forced_pass(self.side, reference, prompt, tokens)

    def generate_from_embeds(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """Refused (the check reads :attr:`embeds_refusal` first): token ids only."""
        from ...errors import TfparityError

        raise TfparityError(f"{self.embeds_refusal}.")
