"""Importing this module makes a keras-hub ``CausalLM``'s logits 0.1% too large on the
torch backend only (``tfparity backends LM.keras --import
tfparity.examples.keras_hub_logits_fault``): the one-backend fault of
:mod:`.keras_backends_model`, at the one layer a task adds to its backbone.

A ``CausalLM`` makes its logits by calling the backbone's ``token_embedding`` again,
``reverse=True``; keras-hub builds that layer itself, so no custom layer can stand in
for it in a saved file. This module wraps the layer class's ``call`` (float) and
``quantized_call`` (int8, int4: Keras runs it in place of ``call``) on torch, so the
same file is right on TensorFlow and JAX and wrong on torch, float or quantised.
"""

from __future__ import annotations

import functools
import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # a backend's process has set its own

import keras  # noqa: E402

SCALE = 1.001


def _skewed(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = method(self, *args, **kwargs)
        return out * SCALE if kwargs.get("reverse", args[1:2] == (True,)) else out

    return wrapper


if keras.backend.backend() == "torch":
    _cls = keras.layers.ReversibleEmbedding
    _cls.call = _skewed(_cls.call)
    _cls.quantized_call = _skewed(_cls.quantized_call)
