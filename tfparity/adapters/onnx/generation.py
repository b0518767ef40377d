"""Greedy generation on an ONNX causal LM, as a :class:`~..interfaces.sides.Generator`:
the graph's own KV-cache path, driven by a greedy loop of tfparity's, since an ONNX file
has no ``generate`` of its own (ONNX Runtime runs one graph call at a time; Optimum's and
transformers.js's loops do the same as this one).

The prompt is prefilled with an empty past (sequence length 0), then each chosen token
is fed alone with the present keys and values the last call returned as its past
(:mod:`.cache`). Each cached step is judged against the same graph run over the whole
sequence with an empty past, so a cache the export wires wrongly (a present output in
the wrong order, a past sequence axis fixed at export) parts from the recomputation. A
defect in the weights is localised by the teacher-forced pass through the ONNX side,
which reads every layer from inside the graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import TfparityError
from ..interfaces.decoding import CAUSAL_DECODING, recomputed_logits, teacher_forced_pass
from ..interfaces.greedy import GreedyRun
from ..interfaces.sides import ForwardPass
from .cache import PAST_NAMES, PRESENT_NAMES, Cache


@dataclass
class ONNXGenerator:
    """Greedy generation on an ONNX side (``side``, an :class:`~.side.ONNXModel`) whose
    graph takes and returns ``cache``."""

    side: Any
    cache: Cache
    notes: list[str] = field(default_factory=list)
    keeps_cache: bool = True  # every step after the prefill runs on the graph's cache
    embeds_refusal: str | None = (
        "the ONNX graph takes token ids (input_ids), not inputs_embeds: generate from "
        "embeddings on the model it was exported from"
    )
    decoding: str = (
        f"{CAUSAL_DECODING}; each step on the graph's KV cache ({PAST_NAMES} in, "
        f"{PRESENT_NAMES} out), the prefill from an empty past"
    )

    def __post_init__(self) -> None:
        self.notes.append(
            f"ONNX generation: {self.side.framework} runs the graph as deployed, one call a "
            f"step: the prompt with an empty past (length 0), then each chosen token with the "
            f"{self.cache.layers} layers' present keys and values as its past "
            "(tfparity's greedy loop: an ONNX file has no generate). The recomputation is "
            "the same graph over the whole sequence with an empty past."
        )

    def generate(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """Greedy decoding of ``new_tokens`` on the graph's cache: the logits each step
        chose from, as the deployed session returned them."""
        runner = self.side.runner
        fed = np.asarray(prompt, np.int64)[None]
        past, done = self.cache.empty(1), 0
        tokens: list[int] = []
        logits: list[np.ndarray] = []
        for _ in range(new_tokens):
            out, past = runner.step(fed, past, done)
            done += fed.shape[1]
            logits.append(np.asarray(out[0, -1], np.float32))
            tokens.append(int(np.argmax(logits[-1])))
            fed = np.array([[tokens[-1]]], np.int64)
        return GreedyRun(np.array(tokens), np.stack(logits), cached=True)

    def step_logits(self, prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The logits for each of ``tokens`` from one run of the whole sequence with an
        empty past (the side's plain run)."""
        return recomputed_logits(self.side, prompt, tokens)

    def forward_pass(self, reference: Any, prompt: np.ndarray, tokens: np.ndarray) -> ForwardPass:
        """The teacher-forced sequence through the ONNX side (its layers read from inside
        the graph)."""
        return teacher_forced_pass(self.side, reference, prompt, tokens)

    def generate_from_embeds(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """Refused (exit 2): the graph takes token ids (:attr:`embeds_refusal`)."""
        raise TfparityError(f"{self.side.name}: {self.embeds_refusal}.")
