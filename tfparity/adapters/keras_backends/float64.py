"""What makes a float64 run of a Keras 3 model compute at float64 throughout, in the
backend worker (Keras handed in; no framework imported here).

Setting every dtype policy of the saved config to float64 is not enough for the layers
people use most. keras-hub's rotary families (Llama, Mistral, Qwen, Gemma, ...) compute
parts of a layer at a float width written in their code, for mixed precision's sake:
``ops.cast(x, "float32")`` in their RMSNorm and before the SiLU gate,
``ops.arange(..., dtype="float32")`` for the rotary embedding's positions and
frequencies, and an attention ``Softmax(dtype="float32")`` built inside the layer (not
in the config). A float64 twin then computes those at float32: the softmax's output says
float32, the others round to float32 and are cast back, so their outputs say float64 and
still carry float32 rounding into the referee.

Keras 3 computes a layer at float64 when its policy and every cast it asks for say
float64, on every backend alike (TensorFlow computes each op at the dtype it is given).
So, while the float64 run lasts, :class:`Float64Scope` makes ``keras.floatx()``
float64 and answers every ``keras.ops`` call that asks for a narrower float dtype
(``cast``, ``arange``, ``ones``, ``convert_to_tensor``, ...) with float64, recording which
classes asked (named in a note); :func:`widen_sublayers` sets to float64 the policy of
each layer built inside another with a float dtype of its own. What still comes out
narrower than float64 (a layer computing outside ``keras.ops``: a framework op called
directly) is named by :func:`narrow_outputs`, for the worker to leave unjudged.
"""

from __future__ import annotations

import inspect
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# The float dtypes a float64 run computes at float64 instead.
NARROW = ("float32", "float16", "bfloat16")
# keras.ops functions whose dtype is not a precision (``view`` reinterprets the bits).
NOT_A_PRECISION = ("view",)


def _is_narrow(keras: Any, dtype: Any) -> bool:
    if dtype is None:
        return False
    try:
        return keras.backend.standardize_dtype(dtype) in NARROW
    except (ValueError, TypeError):
        return False


@dataclass
class Float64Scope:
    """A context manager: inside it ``keras.config.floatx()`` is float64 and every
    ``keras.ops`` function asked for a float32/float16/bfloat16 dtype gets float64.
    :attr:`widened` counts, per class of the code that asked (``QwenLayerNorm``,
    ``RotaryEmbedding``), the requests widened."""

    keras: Any
    widened: Counter = field(default_factory=Counter)
    _restore: list[tuple[str, Any]] = field(default_factory=list)
    _floatx: str = "float32"

    def __enter__(self) -> Float64Scope:
        ops = self.keras.ops
        self._floatx = self.keras.config.floatx()
        self.keras.config.set_floatx("float64")
        for name in dir(ops):
            function = getattr(ops, name)
            if name.startswith("_") or name in NOT_A_PRECISION or not inspect.isfunction(function):
                continue
            parameters = list(inspect.signature(function).parameters)
            if "dtype" in parameters:
                self._restore.append((name, function))
                setattr(ops, name, self._wrapped(function, parameters.index("dtype")))
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, function in reversed(self._restore):
            setattr(self.keras.ops, name, function)
        self._restore.clear()
        self.keras.config.set_floatx(self._floatx)

    def _wrapped(self, function: Any, position: int) -> Any:
        keras, widened = self.keras, self.widened

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if "dtype" in kwargs and _is_narrow(keras, kwargs["dtype"]):
                kwargs["dtype"] = "float64"
            elif len(args) > position and _is_narrow(keras, args[position]):
                args = (*args[:position], "float64", *args[position + 1 :])
            else:
                return function(*args, **kwargs)
            widened[_asker(sys._getframe(1))] += 1
            return function(*args, **kwargs)

        return wrapper

    def note(self, layers: Counter) -> str | None:
        """What the run widened (this scope's casts, and ``layers``, the sublayers
        :func:`widen_sublayers` set), for the report; None where nothing was."""
        asked = sorted(self.widened)
        built = [f"{name} x{count}" for name, count in sorted(layers.items())]
        if not asked and not built:
            return None
        parts = [f"casts to float32 in {', '.join(asked)}"] if asked else []
        parts += [f"sublayers built at float32 ({', '.join(built)})"] if built else []
        return (
            f"the float64 referee computed at float64 the {' and the '.join(parts)}, which "
            "the model fixes in its code for mixed precision: a float64 run of it on Keras 3"
        )


def _asker(frame: Any) -> str:
    """Who asked for the narrow dtype: the class of the method's ``self``
    (``QwenLayerNorm``), else the function (``compute_causal_mask()``)."""
    caller = frame.f_locals.get("self")
    if caller is not None:
        return type(caller).__name__
    return f"{frame.f_code.co_name}()"


def widen_sublayers(keras: Any, model: Any) -> Counter:
    """Set to float64 the policy of every layer inside ``model`` that computes at a
    narrower float dtype (one built by its parent with a dtype of its own, which the
    saved config does not hold: keras-hub's attention ``Softmax(dtype="float32")``);
    how many of each class were set. Quantised layers keep their policy."""
    widened: Counter = Counter()
    for layer in model._flatten_layers(include_self=False, recursive=True):
        policy = getattr(layer, "dtype_policy", None)
        if policy is None or getattr(policy, "quantization_mode", None) is not None:
            continue
        if _is_narrow(keras, policy.compute_dtype):
            layer.dtype_policy = "float64"
            widened[type(layer).__name__] += 1
    return widened


def narrow_outputs(outputs: dict[str, np.ndarray]) -> list[str]:
    """The recorded outputs of a float64 run that are not float64 (float arrays only):
    layers that computed at a narrower width in spite of the run."""
    return [n for n, a in outputs.items() if a.dtype.kind == "f" and a.dtype != np.float64]
