"""``gradients keras-hub:<SPEC> --backend jax|torch``: the gradients check's run of a
keras-hub side in its worker process (:mod:`.hub_worker`'s ``gradients`` request,
computed by :mod:`.hub_gradients`), returned as the in-process side's
:class:`~tfparity.adapters.interfaces.gradients.GradientRun`.

The worker is sent the batch's inputs and what the check's Objective is made of (its
seed, the batch's index, the attention mask), so it draws the same seeded labels or
projection as every other side. Its weight gradients come back by Keras variable path,
the saved backbone's, which are the in-process side's paths: they are renamed and laid
out as PyTorch's through the same converter record and the same function
(:func:`~tfparity.adapters.keras_hub.ports.pt_gradients`). The ids-vs-embeds half is
not run here: the worker is given token ids only (the side's ``inputs_embeds_reason``,
which the check reads first and reports in a note).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import TfparityError
from ...inputs import Batch, check_limits
from ...trace import hidden_state_index
from ..interfaces.gradients import GradientRun, Objective
from ..keras_hub.ports import pt_gradients


def remote_gradients(
    side: Any,
    batch: Batch,
    objective: Objective,
    embeds: bool,
    reference: dict[str, np.ndarray] | None,
) -> GradientRun:
    """One batch's forward and backward pass on ``side`` (a
    :class:`~.remote_side.RemoteKerasHub`), its weights by PyTorch name where
    ``reference`` (PyTorch's weights by name) is given, else by Keras path."""
    if embeds:
        raise TfparityError(f"{side.inputs_embeds_reason}.")
    check_limits(batch, side.limits)
    feed = {k: np.asarray(v) for k, v in side.local.inputs(batch).items()}
    feed["objective:seed"] = np.int64(objective.seed)
    feed["objective:index"] = np.int64(objective.index)
    feed["objective:mask"] = np.asarray(batch.attention_mask)
    got = side.worker.run(feed, kind="gradients")
    hidden = sorted(
        (k.removeprefix("forward:") for k in got if k.startswith("forward:")),
        key=hidden_state_index,
    )
    by_path = {str(p): got.get(f"weight:{p}") for p in got["paths"]}
    word = side.local.word_embeddings().path
    run = GradientRun(
        loss=float(got["loss"]),
        forward={k: got[f"forward:{k}"] for k in hidden},
        hidden={k: got.get(f"grad:{k}") for k in hidden},
        weights=dict(by_path),
        word_embeddings=word,
        scalar=str(got["scalar"]),
    )
    if reference is not None:
        run.weights, run.word_embeddings = pt_gradients(side.local.ports, by_path, reference, word)
    return run
