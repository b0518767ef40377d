"""A tf2onnx handler for TensorFlow's ``Erfc`` op, which tf2onnx 1.17 lacks.

TensorFlow 2.21 builds exact GELU (``gelu(approximate=False)``, BERT's ``gelu``) from
``Erfc``; without a handler tf2onnx logs ``Unsupported ops: Erfc``, saves the file
anyway, and ONNX Runtime refuses it (``No Op registered for Erfc``). Importing this
module registers ``erfc(x) = 1 - erf(x)`` written with ONNX's ``Erf``: import it before
converting (``tf2onnx.convert.from_function``, ``from_keras``, Keras's
``export(format="onnx")``). docs/onnx.md shows it; the tests convert with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tf2onnx import utils
from tf2onnx.handler import tf_op


@tf_op("Erfc")
class Erfc:
    """erfc(x) = 1 - erf(x): ONNX has Erf, not Erfc."""

    @classmethod
    def version_9(cls, ctx: Any, node: Any, **kwargs: Any) -> None:
        dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
        one = ctx.make_const(utils.make_name("one"), np.array(1, dtype))
        erf = ctx.make_node("Erf", [node.input[0]])
        shapes, dtypes = [ctx.get_shape(node.output[0])], [ctx.get_dtype(node.output[0])]
        ctx.remove_node(node.name)
        ctx.make_node(
            "Sub",
            [one.output[0], erf.output[0]],
            outputs=node.output,
            name=node.name,
            shapes=shapes,
            dtypes=dtypes,
        )
