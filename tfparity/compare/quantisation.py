"""Keras's quantisation modes, and the kind a side quantised in one says it is.

The one list of modes tfparity quantises to (``model.quantize``): every command's
``--quantize`` choices, the adapter that quantises
(:mod:`tfparity.adapters.tf_common.quantize`) and the budgets table
(:mod:`.budgets`, keyed by kind: ``keras int8``) all read it from here. Framework-free,
so a command's ``--help`` imports no Keras.
"""

from __future__ import annotations

MODES = ("int8", "int4", "float8")
# the modes that take calibration data, which a stored file may hold (--calibration)
CALIBRATED_MODES = ("gptq", "awq")
KERAS = "keras "  # the prefix of a Keras-quantised side's kind: ``keras int8``


def keras_kind(mode: str) -> str:
    """The kind of a model Keras quantised to ``mode`` (``int4+int8`` where mixed)."""
    return f"{KERAS}{mode}"


def keras_mode(kind: str | None) -> str | None:
    """The mode of a Keras-quantised ``kind`` (``keras int8``: ``int8``); None for any
    other kind (float32, a LiteRT kind)."""
    return kind.removeprefix(KERAS) if kind and kind.startswith(KERAS) else None


# The kinds of an ONNX file ONNX Runtime's quantiser wrote (read from its operators by
# :mod:`tfparity.adapters.onnx.quantised`): int8 weights, activations quantised at run
# time (quantize_dynamic) or by calibrated scales (quantize_static).
ONNX_DYNAMIC_INT8 = "onnx dynamic int8"
ONNX_STATIC_INT8 = "onnx static int8"
ONNX_INT8 = "onnx int8"  # their per-layer growth mode (compare/growth.py)


def growth_mode(kind: str | None) -> str | None:
    """The mode whose per-layer growth limit holds a side of ``kind``: a Keras mode's
    own; an ONNX int8 kind's ``onnx int8`` (Keras int8's limit, a first block of its
    own); None for others."""
    if kind in (ONNX_DYNAMIC_INT8, ONNX_STATIC_INT8):
        return ONNX_INT8
    return keras_mode(kind)
