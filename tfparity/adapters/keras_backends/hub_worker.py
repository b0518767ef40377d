"""What runs inside the process of a keras-hub side on another Keras backend
(``crosscheck keras-hub:<SPEC> --backend jax|torch``): load the backbone's ``.keras``
file once, then answer requests until stdin closes.

Run as ``python -m tfparity.adapters.keras_backends.hub_worker MODEL.keras`` with
``KERAS_BACKEND`` set by the parent (:mod:`.remote_side`). The protocol is one line per
message, so a run costs no process start: the worker says ``ready`` with its facts
(JSON), then for each request line ``IN.npz OUT.npz`` (the backbone's inputs by name)
it writes the hidden states by Hugging Face name (:func:`.models.hidden_state_layers`)
to ``OUT.npz`` and answers ``done``, or ``error`` with one paragraph. Every protocol
line starts with :data:`MARK`, so anything a framework prints is skipped by the parent.
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

MARK = "tfparity-hub-worker:"


def _recorder(keras: Any, backbone: Any) -> Any:
    """A model of the backbone's inputs whose outputs are its hidden states by HF name,
    and ``last_hidden_state`` (the backbone's ``sequence_output``)."""
    from .models import hidden_state_layers

    tensors = {
        alias: backbone.get_layer(layer).output
        for alias, layer in hidden_state_layers(backbone).items()
    }
    out = backbone.output
    tensors["last_hidden_state"] = out["sequence_output"] if isinstance(out, dict) else out
    return keras.Model(backbone.input, tensors)


def _facts(keras: Any, backbone: Any) -> dict[str, Any]:
    from .worker import precision_facts

    backend = keras.backend.backend()
    return {
        "backend": backend,
        "keras": keras.__version__,
        "backbone": type(backbone).__name__,
        "precision": precision_facts(keras, backend),
    }


def _answer(reply: Any, kind: str, text: str = "") -> None:
    reply.write(f"{MARK}{kind} {' '.join(text.split())}\n")
    reply.flush()


def serve(path: str, requests: Any, reply: Any) -> None:
    """Load ``path``, say ready, answer each request line of ``requests``."""
    import keras
    import keras_hub  # noqa: F401  (registers the backbone classes the file names)

    backbone = keras.saving.load_model(path, compile=False)
    recorder = _recorder(keras, backbone)
    _answer(reply, "ready", json.dumps(_facts(keras, backbone)))
    for line in requests:
        if not line.strip():
            continue
        given, out = line.split()
        try:
            with np.load(given) as held:
                feed = {k: held[k] for k in held.files}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                produced = recorder(feed, training=False)
            arrays = {k: np.asarray(keras.ops.convert_to_numpy(v)) for k, v in produced.items()}
            np.savez(out, **arrays)
            _answer(reply, "done")
        except Exception as e:  # the parent reports it as one paragraph
            _answer(reply, "error", f"{type(e).__name__}: {e}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    reply = sys.stdout
    sys.stdout = sys.stderr  # what a framework prints stays off the protocol
    try:
        serve(args[0], sys.stdin, reply)
    except Exception as e:  # loading failed: the parent reports it (exit 2 there)
        _answer(reply, "error", f"{type(e).__name__}: {e}")
        return 2
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
