"""What the exact check's adapter says of a file it cannot reproduce
(tfparity/adapters/keras_hub/requantise.py), on synthetic variable sets: another
mode's variables, another tool's, and the same as a fresh quantisation's."""

from __future__ import annotations

import numpy as np

from tfparity.adapters.keras_hub.requantise import another_quantisation, looks_like
from tfparity.compare.requantisation import QuantisedVariable

LAYER = "transformer_layer_0/self_attention/query"


def _variables(mode: str, **shapes: tuple[int, ...]) -> dict[str, QuantisedVariable]:
    found = {}
    for name, shape in shapes.items():
        dtype = np.int8 if name in ("kernel", "kernel_zero") else np.float32
        path = f"{LAYER}/{name}"
        found[path] = QuantisedVariable(path, np.zeros(shape, dtype), mode)
    return found


INT8 = {"kernel": (32, 4, 8), "kernel_scale": (1, 1, 4, 8)}
INT4 = {"kernel": (32, 16), "kernel_scale": (1, 32), "kernel_zero": (1, 32), "g_idx": (32,)}


def test_the_same_variables_as_a_fresh_quantisation_are_not_another_one():
    assert (
        another_quantisation(_variables("int8", **INT8), _variables("int8", **INT8), "int8") is None
    )


def test_int4_variables_where_int8_is_claimed_are_said_to_be_int4():
    stored, fresh = _variables("int8", **INT4), _variables("int8", **INT8)
    assert looks_like(stored) == "int4" and looks_like(fresh) == "int8"
    why = another_quantisation(stored, fresh, "int8")
    assert why is not None and why.startswith("quantised as int4, not int8")


def test_variables_no_keras_mode_makes_are_another_tools():
    stored = _variables("int8", kernel=(32, 4, 8), kernel_scale=(1,))  # one scale per tensor
    why = another_quantisation(stored, _variables("int8", **INT8), "int8")
    assert why is not None and why.startswith("not Keras's own int8 quantisation of this source")
    assert f"{LAYER}/kernel_scale" in why
