"""How a TF model runs: on which device, eagerly or compiled (tf.function, XLA), in
which precision (fp32, mixed_float16, mixed_bfloat16), with TF32 on or off.

Checks stay unaware of all this: ``TFModel.executed(options)`` returns a model whose
``run`` and ``gather`` honour an :class:`~.execution_options.ExecutionOptions` (its
compiled paths in :mod:`.compiled_paths`), so any check runs under any execution
unchanged. This module holds the contexts that place a run and the clone that changes
its precision.

What works with Hugging Face TF models (as tested with transformers 4.57, tf-keras
2.21): a tf-keras mixed-precision policy takes effect when the model's layers are
*created*, so it cannot be switched on for a model already built. Building a fresh
model of the same class from the same config while the policy is set
(``tf_keras.mixed_precision.set_global_policy``) works for BERT-like models: its
variables stay float32 (so the loaded weights are copied over unchanged), its
computations and outputs are float16/bfloat16. ``inputs_embeds`` must then be given
in the compute dtype (the models add them to float16 position embeddings without a
cast), so the TF side casts them. Casting a built model's weights to
float16 instead does not work: the layers still compute in float32 and mix dtypes.
The policy is set only while the clone is built and restored at once, so no global
mixed-precision state outlives a call.

Placement: ``tf.device`` is entered around every run (and around the clone's
creation, so its variables live on that device). TF32, a global TensorFlow switch,
is set for the run and restored after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ...errors import TfparityError
from .devices import short_name
from .execution_options import POLICIES, ExecutionOptions
from .imports import import_tf

# ----------------------------------------------------------------------------- contexts


@contextlib.contextmanager
def placed(options: ExecutionOptions) -> Iterator[None]:
    """Run the body on ``options.device`` with its TF32 setting; out of memory -> exit 2."""
    tf = import_tf()
    with contextlib.ExitStack() as stack:
        if options.device:
            stack.enter_context(tf.device(options.device))
        if options.tf32 is not None:
            stack.enter_context(tf32_enabled(options.tf32))
        stack.enter_context(out_of_memory_as_error(options.device))
        yield


@contextlib.contextmanager
def tf32_enabled(enabled: bool) -> Iterator[None]:
    """Set TensorFlow's TF32 switch for the body and restore it after."""
    tf = import_tf()
    before = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(enabled)
    try:
        yield
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(before)


@contextlib.contextmanager
def mixed_precision_policy(name: str | None) -> Iterator[None]:
    """Set the tf-keras global policy for the body (``None``: leave it) and restore it."""
    if name is None:
        yield
        return
    import_tf()
    import tf_keras

    before = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        tf_keras.mixed_precision.set_global_policy(before)


_OOM_MARKERS = ("out of memory", "dst tensor is not initialized", "oom when allocating")


@contextlib.contextmanager
def out_of_memory_as_error(device: str | None) -> Iterator[None]:
    """A model or batch that does not fit on the device is bad input (exit 2), with
    what to do about it, not a traceback from deep inside TensorFlow."""
    tf = import_tf()
    try:
        yield
    except (tf.errors.ResourceExhaustedError, tf.errors.InternalError) as exc:
        text = str(exc)
        oom = isinstance(exc, tf.errors.ResourceExhaustedError) or any(
            m in text.lower() for m in _OOM_MARKERS
        )
        if not oom:
            raise
        where = short_name(device) if device else "the device"
        first = text.strip().splitlines()[0][:200] if text.strip() else type(exc).__name__
        raise TfparityError(
            f"The model and batch do not fit in the memory of {where} ({first}). Use a "
            "smaller --batch-size or --seq-len, fp16/bf16 precision, or --device cpu."
        ) from exc


# ----------------------------------------------------------------------------- models


class PrecisionUnsupportedError(TfparityError):
    """The model's own TF code does not run under a mixed-precision policy (exit 2 for
    a command that asked for it; a mode the ``modes`` check reports as not run)."""


# How TensorFlow says an op got a tensor of another dtype than its other inputs.
_DTYPE_MISMATCH = (
    "was expected to be a",  # eager
    "that does not match type",  # graph: an op input of another dtype
    "Tensor conversion requested dtype",
)


def unsupported_precision(
    model: str, precision: str, exc: Exception, when: str
) -> PrecisionUnsupportedError | None:
    """The error to raise for ``exc``, raised by ``model``'s own TF code ``when`` (while
    building, while running) under ``precision``: a dtype mismatch under a mixed policy
    (transformers' TF Mistral builds its mask in float32, CTRL its position embeddings,
    beside half-precision activations); None for anything else."""
    policy = POLICIES[precision]
    text = str(exc)
    if policy is None or not any(m in text for m in _DTYPE_MISMATCH):
        return None
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    said = [x for x in lines if not x.startswith("Exception encountered")]
    first = (said or [type(exc).__name__])[0].split(" [Op:")[0][:160]
    return PrecisionUnsupportedError(
        f"{model} does not run under tf-keras's {policy} policy: its TF code fails {when} "
        f"({first}). It can be checked in fp32 only."
    )


def clone_model(source: Any, config: Any, options: ExecutionOptions) -> Any:
    """A new HF TF model of ``source``'s class and ``config``, built under ``options``'s
    precision policy on its device, holding a copy of ``source``'s weights."""
    tf = import_tf()
    with placed(replace(options, tf32=None)), mixed_precision_policy(POLICIES[options.precision]):
        clone = type(source).from_config(config)
        try:
            clone(clone.dummy_inputs, training=False)
        except (tf.errors.InvalidArgumentError, TypeError, ValueError) as exc:
            name = type(source).__name__
            found = unsupported_precision(name, options.precision, exc, "while building")
            if found is None:
                raise
            raise found from exc
        _copy_weights(tf, source.weights, clone.weights)
    return clone


def _copy_weights(tf: Any, source: list[Any], target: list[Any]) -> None:
    if len(source) != len(target):
        raise TfparityError(
            f"Rebuilding the model gave {len(target)} weights instead of {len(source)}; "
            "this model cannot run in another precision or on another device."
        )
    for src, dst in zip(source, target, strict=True):
        if tuple(src.shape) != tuple(dst.shape):
            raise TfparityError(
                f"Rebuilding the model gave weight {dst.name} the shape {tuple(dst.shape)} "
                f"instead of {tuple(src.shape)}."
            )
        dst.assign(tf.cast(src, dst.dtype))
