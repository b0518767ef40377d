"""How a keras-hub side computes: its forward strategy. The side
(:class:`~.side.KerasHubModel`, or its causal-LM task) is one object whatever computes
it: its config, tokenizer, limits, layout and the converter's record of its weights are
read off the backbone converted here, on TensorFlow. Only its forward pass, gradients
and generation are computed elsewhere when it runs on another Keras backend: in this
process (:class:`InProcess`), or in a backend's worker process
(:class:`~.remote.InWorker`, ``--backend jax|torch``), which is given token ids only and
records hidden states (no taps, no ``inputs_embeds`` path, no reload).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...inputs import Batch
from ...trace import Trace
from ..interfaces.gradients import GradientRun
from .ports import pt_gradients


class ForwardStrategy(Protocol):
    """Where a keras-hub side's forward pass, gradients and generation are computed."""

    backend: str  # the Keras backend that computes them
    here: bool  # in this process: taps, isolated runs, inputs_embeds and reloads too
    framework: str  # for the report's ``compares`` line
    models: str  # what an ExecutionOptions refusal calls the models it computes

    def run(self, side: Any, batch: Batch, inputs_embeds: Any) -> Trace: ...
    def gradients(
        self,
        side: Any,
        batch: Batch,
        objective: Any,
        embeds: bool,
        embeds_fn: Any,
        reference: dict[str, np.ndarray] | None,
    ) -> GradientRun: ...
    def generator(self, side: Any) -> Any: ...
    def ids_only_reason(self, side: Any) -> str | None: ...  # why token ids only; None
    def command_name(self, side: Any) -> str: ...
    def side_kind(self, side: Any) -> str: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class InProcess:
    """The side's backbone (or task) called here, on TensorFlow: its hidden states
    recorded per block call (:class:`~.taps.BlockRecording`), its gradients on a tape."""

    backend: str = "tensorflow"
    here: bool = True
    framework: str = "TensorFlow"
    models: str = "keras-hub models"

    def run(self, side: Any, batch: Batch, inputs_embeds: Any) -> Trace:
        trace, _ = side.traced(batch, inputs_embeds)
        return trace

    def gradients(
        self,
        side: Any,
        batch: Batch,
        objective: Any,
        embeds: bool,
        embeds_fn: Any,
        reference: dict[str, np.ndarray] | None,
    ) -> GradientRun:
        """The gradients check's scalar differentiated (see :meth:`TFModel.gradients`).
        Weights are named by PyTorch name in PyTorch's layout through the converter's
        record where ``reference`` (PyTorch's weights by name) is given, else by their
        Keras paths."""
        from .gradients import backbone_gradients

        feed = side.inputs(batch)

        def call(fed: Any) -> dict[str, Any]:
            return side.forward(feed, fed)

        run, variables, grads = backbone_gradients(side, batch, objective, call, embeds, embeds_fn)
        by_path = dict(zip((v.path for v in variables), grads, strict=True))
        run.weights, run.word_embeddings = dict(by_path), side.word_embeddings().path
        if reference is not None:
            run.weights, run.word_embeddings = pt_gradients(
                side.ports, by_path, reference, run.word_embeddings
            )
        return run

    def generator(self, side: Any) -> Any:
        return side.in_process_generator()

    def ids_only_reason(self, side: Any) -> str | None:
        return None

    def command_name(self, side: Any) -> str:
        return side.name

    def side_kind(self, side: Any) -> str:
        task = getattr(side, "task", None)
        if task is None:
            return f"a keras-hub backbone ({type(side.backbone).__name__})"
        return f"a keras-hub task ({type(task).__name__})"

    def close(self) -> None:
        """Nothing to end: the model lives in this process."""
