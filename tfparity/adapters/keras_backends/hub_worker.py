"""The requests a serving worker (:mod:`.worker`) answers for the keras-hub side on
another Keras backend (``crosscheck``/``generate``/``gradients keras-hub:<SPEC> --backend
jax|torch``, :mod:`tfparity.adapters.keras_hub.remote`): handlers of its table
(:data:`HUB_REQUESTS`), answered by the same loop, errors and deadline as a backend's
run for ``tfparity backends``.

``load {"model": PATH}`` loads the backbone's (or its CausalLM task's) ``.keras`` file
once and answers what it holds (JSON: its classes); each later request is ``KIND
{"given": IN.npz, "out": OUT.npz}``: ``forward`` (IN holds the model's inputs by name)
writes the hidden states by Hugging Face name (:func:`.hidden_states.hidden_state_layers`),
and a task's ``logits``; ``generate`` (IN holds ``prompt`` and ``new_tokens``) writes the
task's greedy ``tokens`` and the ``logits`` each step chose from (:func:`greedy`);
``gradients`` (IN holds the inputs and the gradients check's objective) writes the
hidden states, the loss and the gradients (:func:`.hub_gradients.hub_gradients`). The
loaded model is kept between requests (no ``fresh`` Keras state). Like :mod:`.worker`,
it imports no Keras at module level and nothing of tfparity that would pull in a
framework.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .protocol import Handler, Session


def _recorder(keras: Any, backbone: Any, task: Any) -> Any:
    """A model of the backbone's inputs whose outputs are its hidden states by HF name,
    and ``last_hidden_state`` (the backbone's ``sequence_output``); with a CausalLM
    ``task`` (built on the same inputs), its ``logits`` too, from the same pass."""
    from .hidden_states import hidden_state_tensors

    tensors = dict(hidden_state_tensors(backbone))  # per call: ALBERT's shared blocks too
    out = backbone.output
    tensors["last_hidden_state"] = out["sequence_output"] if isinstance(out, dict) else out
    if task is not None:
        tensors["logits"] = task.output
    return keras.Model(backbone.input, tensors)


def recording_sampler(keras: Any, keras_hub: Any) -> Any:
    """keras-hub's ``GreedySampler``, keeping the logits of each step as it receives
    them (``steps``), its loop driven in Python: ``ops.while_loop`` traces its body on
    JAX (``lax.while_loop``), where the logits are not numbers; a Python loop runs the
    same body (``generate_step``'s ``call_with_cache`` on the KV cache) step by step,
    eagerly, on every backend. No stop token: the loop runs every step."""

    class RecordingGreedySampler(keras_hub.samplers.GreedySampler):
        def __init__(self) -> None:
            super().__init__()
            self.steps: list[np.ndarray] = []

        def compute_probabilities(self, logits: Any) -> Any:
            self.steps.append(np.asarray(keras.ops.convert_to_numpy(logits), np.float32))
            return super().compute_probabilities(logits)

        def run_loop(
            self, cond: Any, body: Any, model: Any = None, loop_vars: Any = None, **kw: Any
        ) -> Any:
            for _ in range(int(keras.ops.convert_to_numpy(kw["maximum_iterations"]))):
                loop_vars = body(*loop_vars)
            return loop_vars

    return RecordingGreedySampler()


def greedy(task: Any, sampler: Any, prompt: np.ndarray, new_tokens: int) -> dict[str, Any]:
    """``task.generate`` (compiled with ``sampler``, run eagerly) on ``prompt`` padded
    with ``new_tokens`` free positions, as the TensorFlow side's generator does
    (:class:`~tfparity.adapters.keras_hub.generation.KerasHubGenerator`): the new
    tokens and each step's logits [new_tokens, vocab]."""
    sampler.steps.clear()
    n = len(prompt)
    ids = np.zeros((1, n + new_tokens), np.int32)
    ids[0, :n] = prompt
    mask = (np.arange(n + new_tokens) < n).astype(np.int32)[None]
    out = task.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
    tokens = np.asarray(out["token_ids"])[0, n:]
    return {"tokens": tokens, "logits": np.stack([step[0] for step in sampler.steps])}


@dataclass
class Loaded:
    """The model a ``load`` request loaded, kept for the requests after it."""

    model: Any  # the file's model: a backbone, or a CausalLM task
    backbone: Any
    task: Any  # None for a backbone
    recorder: Any  # :func:`_recorder`'s model
    sampler: Any  # the task's recording sampler (None for a backbone)


def _load(session: Session, text: str) -> str:
    """Load the ``.keras`` file the request names (keras-hub registers its classes on
    import: the worker imports ``keras_hub``) and keep it; what it holds, as JSON."""
    import keras
    import keras_hub

    model = keras.saving.load_model(json.loads(text)["model"], compile=False)
    task = model if isinstance(model, keras_hub.models.CausalLM) else None
    backbone = model if task is None else task.backbone
    sampler = None
    if task is not None:
        sampler = recording_sampler(keras, keras_hub)
        task.compile(sampler=sampler, run_eagerly=True)
    session.held["keras-hub"] = Loaded(
        model, backbone, task, _recorder(keras, backbone, task), sampler
    )
    kinds = {"backbone": type(backbone).__name__}
    return json.dumps({**kinds, "task": None if task is None else type(task).__name__})


def _forward(keras: Any, loaded: Loaded, feed: dict[str, np.ndarray]) -> dict[str, Any]:
    produced = loaded.recorder(feed, training=False)
    return {k: keras.ops.convert_to_numpy(v) for k, v in produced.items()}


def _generate(keras: Any, loaded: Loaded, feed: dict[str, np.ndarray]) -> dict[str, Any]:
    if loaded.task is None:
        raise ValueError("a backbone has no LM head to generate with")
    return greedy(loaded.task, loaded.sampler, feed["prompt"], int(feed["new_tokens"]))


def _gradients(keras: Any, loaded: Loaded, feed: dict[str, np.ndarray]) -> dict[str, Any]:
    from .hub_gradients import hub_gradients

    return hub_gradients(keras, loaded.model, loaded.backbone, feed)


def _on_loaded(compute: Callable[[Any, Loaded, dict[str, np.ndarray]], dict[str, Any]]) -> Handler:
    """A request on the loaded model: its arrays read from ``given``, ``compute``'s
    written to ``out``."""

    def handled(session: Session, text: str) -> str:
        import keras

        loaded = session.held.get("keras-hub")
        if loaded is None:
            raise ValueError("no keras-hub model is loaded: send a load request first")
        paths = json.loads(text)
        with np.load(paths["given"]) as held:
            feed = {k: held[k] for k in held.files}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arrays = compute(keras, loaded, feed)
        np.savez(paths["out"], **{k: np.asarray(v) for k, v in arrays.items()})
        return ""

    return Handler(handled, fresh=False)


HUB_REQUESTS: dict[str, Handler] = {
    "load": Handler(_load, fresh=False),
    "forward": _on_loaded(_forward),
    "generate": _on_loaded(_generate),
    "gradients": _on_loaded(_gradients),
}
