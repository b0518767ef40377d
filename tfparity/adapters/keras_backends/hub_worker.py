"""What runs inside the process of a keras-hub side on another Keras backend
(``crosscheck``/``generate``/``gradients keras-hub:<SPEC> --backend jax|torch``): load
the backbone's (or its CausalLM task's) ``.keras`` file once, then answer requests until
stdin closes.

Run as ``python -m tfparity.adapters.keras_backends.hub_worker MODEL.keras`` with
``KERAS_BACKEND`` set by the parent (:mod:`.remote_side`). The protocol is one line per
message, so a run costs no process start: the worker says ``ready`` with its facts
(JSON), then answers each request line ``KIND IN.npz OUT.npz``: ``run`` (IN holds the
model's inputs by name) writes the hidden states by Hugging Face name
(:func:`.models.hidden_state_layers`), and a task's ``logits``; ``generate`` (IN holds
``prompt`` and ``new_tokens``) writes the task's greedy ``tokens`` and the ``logits``
each step chose from (:func:`greedy`); ``gradients`` (IN holds the inputs and the
gradients check's objective) writes the hidden states, the loss and the gradients
(:func:`.hub_gradients.hub_gradients`). It answers ``done``, or ``error`` with one
paragraph. Every protocol
line starts with :data:`.protocol.MARK`, so anything a framework prints is skipped by
the parent.
Like :mod:`.worker`, it imports no Keras at module level and nothing of tfparity that
would pull in a framework.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import numpy as np

from .protocol import answer


def _recorder(keras: Any, backbone: Any, task: Any) -> Any:
    """A model of the backbone's inputs whose outputs are its hidden states by HF name,
    and ``last_hidden_state`` (the backbone's ``sequence_output``); with a CausalLM
    ``task`` (built on the same inputs), its ``logits`` too, from the same pass."""
    from .models import hidden_state_tensors

    tensors = dict(hidden_state_tensors(backbone))  # per call: ALBERT's shared blocks too
    out = backbone.output
    tensors["last_hidden_state"] = out["sequence_output"] if isinstance(out, dict) else out
    if task is not None:
        tensors["logits"] = task.output
    return keras.Model(backbone.input, tensors)


def _facts(keras: Any, backbone: Any, task: Any) -> dict[str, Any]:
    from .worker import precision_facts

    backend = keras.backend.backend()
    return {
        "backend": backend,
        "keras": keras.__version__,
        "backbone": type(backbone).__name__,
        "task": None if task is None else type(task).__name__,
        "precision": precision_facts(keras, backend),
    }


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


def serve(path: str, requests: Any, reply: Any) -> None:
    """Load ``path``, say ready, answer each request line of ``requests``."""
    import keras
    import keras_hub  # noqa: F401  (registers the backbone classes the file names)

    model = keras.saving.load_model(path, compile=False)
    task = model if isinstance(model, keras_hub.models.CausalLM) else None
    backbone = model if task is None else task.backbone
    recorder = _recorder(keras, backbone, task)
    sampler = None
    if task is not None:
        sampler = recording_sampler(keras, keras_hub)
        task.compile(sampler=sampler, run_eagerly=True)
    answer(reply, "ready", json.dumps(_facts(keras, backbone, task)))
    for line in requests:
        if not line.strip():
            continue
        kind, given, out = line.split()
        try:
            with np.load(given) as held:
                feed = {k: held[k] for k in held.files}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if kind == "generate":
                    if task is None:
                        raise ValueError("a backbone has no LM head to generate with")
                    arrays = greedy(task, sampler, feed["prompt"], int(feed["new_tokens"]))
                elif kind == "gradients":
                    from .hub_gradients import hub_gradients

                    arrays = hub_gradients(keras, model, backbone, feed)
                else:
                    produced = recorder(feed, training=False)
                    arrays = {k: keras.ops.convert_to_numpy(v) for k, v in produced.items()}
            np.savez(out, **{k: np.asarray(v) for k, v in arrays.items()})
            answer(reply, "done")
        except Exception as e:  # the parent reports it as one paragraph
            answer(reply, "error", f"{type(e).__name__}: {e}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    reply = sys.stdout
    sys.stdout = sys.stderr  # what a framework prints stays off the protocol
    try:
        serve(args[0], sys.stdin, reply)
    except Exception as e:  # loading failed: the parent reports it (exit 2 there)
        answer(reply, "error", f"{type(e).__name__}: {e}")
        return 2
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
