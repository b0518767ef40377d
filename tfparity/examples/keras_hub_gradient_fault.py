"""A backward-pass fault in a keras-hub backbone, on torch only, for ``tfparity
backends keras-hub:SPEC --gradients --import tfparity.examples.keras_hub_gradient_fault``.

Importing this module wraps ``keras_hub.layers.TransformerEncoder.call`` so that the
layer named ``transformer_layer_1`` returns ``s + 1.001 * (y - s)``, ``s =
stop_gradient(y)``, on torch: ``y`` exactly forwards (``y - s`` is 0), its gradient
0.1% too large backwards. Every other backend, and every other layer, is untouched.
Import it only in runs meant to fail: a process keeps its imports.
"""

from __future__ import annotations

import functools
import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # a backend's process has set its own

import keras  # noqa: E402
import keras_hub  # noqa: E402

FAULTY_LAYER = "transformer_layer_1"
_call = keras_hub.layers.TransformerEncoder.call


@functools.wraps(_call)  # Keras reads call's signature: it must stay the original's
def _skewed(self: Any, *args: Any, **kwargs: Any) -> Any:
    y = _call(self, *args, **kwargs)
    if self.name != FAULTY_LAYER or keras.backend.backend() != "torch":
        return y
    held = keras.ops.stop_gradient(y)
    return held + 1.001 * (y - held)


keras_hub.layers.TransformerEncoder.call = _skewed
