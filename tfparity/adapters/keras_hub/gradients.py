"""TensorFlow gradients of a keras-hub backbone or task for the gradients check: one
``tf.GradientTape`` run per batch and path (:mod:`..runtime.imports.tape`), the hidden states
being the transformer blocks' input and output tensors, recorded as tensors so that
the tape can differentiate with respect to them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...inputs import Batch
from ..interfaces.gradients import GradientRun, Objective
from ..runtime.imports import import_tf
from ..tf_common.tape import (
    EmbedsFn,
    differentiate,
    fed_embeddings,
    objective_terms,
    tf_loss,
    with_scalar,
)
from .taps import unique_blocks


def backbone_gradients(
    model: Any,
    batch: Batch,
    objective: Objective,
    call: Callable[[Any], Any],
    embeds: bool,
    embeds_fn: EmbedsFn | None,
) -> tuple[GradientRun, list[Any], list[np.ndarray | None]]:
    """One tape run of a keras-hub backbone or task: ``call(fed)`` runs it (``fed``
    None: the ids path) and returns its outputs by name (``sequence_output``, and a
    task's ``logits``, which the objective then reads). Hidden states are the blocks'
    input and output tensors, as :class:`~.side.keras_hub_taps.BlockRecording` records their
    values, the last one the backbone's ``sequence_output``. Returns the run, the
    trainable variables and their gradients (the adapter maps them to PyTorch names
    through its converter)."""
    tf = import_tf()
    variables = list(model.backbone.trainable_variables)
    with tf.GradientTape() as tape, block_tensors(model.backbone) as blocks:
        fed = fed_embeddings(tf, tape, model, batch, embeds_fn) if embeds else None
        out = call(fed)
        seq = out["sequence_output"]
        hidden = [blocks.inputs[0], *blocks.outputs[:-1], seq] if blocks.inputs else [seq]
        outputs = {"last_hidden_state": seq}
        if "logits" in out:  # a task: the head's loss, as for HF head models
            outputs["logits"] = out["logits"]
        loss = tf_loss(outputs, objective_terms(objective, outputs, batch))
    run, grads = differentiate(tf, tape, loss, fed, hidden, variables)
    return with_scalar(run, outputs, batch), variables, grads


class _Blocks:
    def __init__(self) -> None:
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []


@contextlib.contextmanager
def block_tensors(backbone: Any) -> Iterator[_Blocks]:
    """The tensors each transformer block takes and returns during the body (kept as
    tensors, so that the tape can differentiate with respect to them)."""
    blocks, restore = _Blocks(), []
    for block in unique_blocks(backbone):
        restore.append((block, block.call))
        block.call = _recording(block.call, blocks)
    try:
        yield blocks
    finally:
        for block, call in reversed(restore):
            block.call = call


def _recording(call: Callable, blocks: _Blocks) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        blocks.inputs.append(args[0])
        out = call(*args, **kwargs)
        blocks.outputs.append(out[0] if isinstance(out, (tuple, list)) else out)
        return out

    return wrapper
