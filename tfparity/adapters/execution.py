"""How a TF model runs: on which device, eagerly or compiled (tf.function, XLA), in
which precision (fp32, mixed_float16, mixed_bfloat16), with TF32 on or off.

Checks stay unaware of all this: :func:`with_execution` returns a :class:`TFModel`
whose ``run`` and ``gather`` honour an :class:`ExecutionOptions`, so any check that
takes a TFModel runs under any execution unchanged.

What works with Hugging Face TF models (as tested with transformers 4.57, tf-keras
2.21): a tf-keras mixed-precision policy takes effect when the model's layers are
*created*, so it cannot be switched on for a model already built. Building a fresh
model of the same class from the same config while the policy is set
(``tf_keras.mixed_precision.set_global_policy``) works for BERT-like models: its
variables stay float32 (so the loaded weights are copied over unchanged), its
computations and outputs are float16/bfloat16. ``inputs_embeds`` must then be given
in the compute dtype (the models add them to float16 position embeddings without a
cast), so :class:`ExecutedModel` casts them. Casting a built model's weights to
float16 instead does not work: the layers still compute in float32 and mix dtypes.
The policy is set only while the clone is built and restored at once, so no global
mixed-precision state outlives a call.

Placement: ``tf.device`` is entered around every run (and around the clone's
creation, so its variables live on that device). TF32, a global TensorFlow switch,
is set for the run and restored after it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import TfparityError
from ..inputs import Batch, check_limits
from ..trace import Trace
from .devices import resolve_devices, short_name
from .runtime import import_tf
from .tf_model import TFModel

Precision = Literal["fp32", "fp16", "bf16"]
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")
_POLICIES = {"fp32": None, "fp16": "mixed_float16", "bf16": "mixed_bfloat16"}
_COMPUTE_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# From this many batches a path's one trace saves more than it costs against eager calls.
GRAPH_FROM_BATCHES = 8


@dataclass(frozen=True)
class ExecutionOptions:
    """One way of running a model.

    ``device``: a TF device name (``/device:GPU:0``) or ``None`` for TensorFlow's
    own placement. ``graph``: ``tf.function``; ``xla``: ``tf.function(jit_compile=True)``
    (implies graph). ``tf32``: ``None`` leaves TensorFlow's setting alone. ``auto``:
    eager or graph is chosen by :meth:`settle` from the number of batches.
    """

    device: str | None = None
    xla: bool = False
    graph: bool = False
    precision: Precision = "fp32"
    tf32: bool | None = None
    auto: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise TfparityError(
                f"Unknown precision '{self.precision}'; use one of {', '.join(PRECISIONS)}."
            )

    @property
    def compiled(self) -> bool:
        return self.xla or self.graph

    @property
    def runner_kind(self) -> str:
        return "xla" if self.xla else ("graph" if self.graph else "eager")

    @property
    def compute_dtype(self) -> str:
        """The dtype the model computes in; TF32 matmuls count as ``tf32``."""
        if self.precision == "fp32" and self.tf32:
            return "tf32"
        return _COMPUTE_DTYPES[self.precision]

    @property
    def label(self) -> str:
        """``eager``, ``xla``, ``graph+fp16``, ``tf32``: what differs from eager fp32."""
        parts = [self.runner_kind] if self.compiled else []
        if self.precision != "fp32":
            parts.append(self.precision)
        if self.tf32:
            parts.append("tf32")
        return "+".join(parts) or "eager"

    def settle(self, batches: int) -> ExecutionOptions:
        """With ``auto``: graph when each path runs at least :data:`GRAPH_FROM_BATCHES`
        batches (the one-off trace then pays for itself), eager below."""
        if not self.auto or self.xla:
            return self
        return replace(self, graph=batches >= GRAPH_FROM_BATCHES)

    def describe(self) -> dict[str, Any]:
        """Plain facts for a report's details."""
        facts = {
            "device": short_name(self.device) if self.device else "default",
            "execution": self.runner_kind,
            "precision": self.precision,
            "tf32": self._tf32_text(),
        }
        if self.auto and not self.xla:
            n = GRAPH_FROM_BATCHES
            facts["execution_chosen"] = f"auto (eager below {n} batches, graph from {n})"
        return facts

    def _tf32_text(self) -> str:
        if self.device and not _is_gpu(self.device):
            return "n/a"  # TF32 is a GPU matmul mode
        return "default" if self.tf32 is None else ("on" if self.tf32 else "off")


_MODE_PART = re.compile(r"^(eager|graph|xla|fp32|fp16|bf16|tf32)$")


def parse_mode(mode: str, device: str | None = None) -> ExecutionOptions:
    """``xla``, ``fp16``, ``graph+bf16``, ``tf32`` … -> ExecutionOptions on ``device``.

    On a GPU, modes that do not ask for TF32 turn it off, so an "fp32" mode is real
    fp32 there too (TensorFlow enables TF32 by default on Ampere and newer).
    """
    parts = [p.strip().lower() for p in mode.split("+") if p.strip()]
    bad = [p for p in parts if not _MODE_PART.match(p)]
    if not parts or bad:
        raise TfparityError(
            f"Unknown mode '{mode}'. Modes are eager, graph, xla, fp16, bf16, tf32, or "
            "combinations joined by '+' (e.g. xla+fp16)."
        )
    precision = next((p for p in parts if p in ("fp16", "bf16")), "fp32")
    if "fp16" in parts and "bf16" in parts:
        raise TfparityError(f"Mode '{mode}' asks for both fp16 and bf16.")
    return ExecutionOptions(
        device=device,
        xla="xla" in parts,
        graph="graph" in parts,
        precision=precision,  # type: ignore[arg-type]
        tf32=True if "tf32" in parts else (False if _is_gpu(device) else None),
    )


def _is_gpu(device: str | None) -> bool:
    return bool(device) and short_name(device).startswith("gpu")


def expand_devices(options: ExecutionOptions, spec: str | None) -> list[ExecutionOptions]:
    """One ExecutionOptions per device that ``spec`` names (``None``: TF's choice)."""
    if spec is None:
        return [options]
    return [replace(options, device=name) for name in resolve_devices(spec)]


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


def clone_model(model: TFModel, options: ExecutionOptions) -> Any:
    """A new HF TF model of the same class and config, built under ``options``'s
    precision policy on its device, holding a copy of ``model``'s weights."""
    tf = import_tf()
    source = model.model
    with placed(replace(options, tf32=None)), mixed_precision_policy(_POLICIES[options.precision]):
        clone = type(source).from_config(model.config)
        clone(clone.dummy_inputs, training=False)
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


@dataclass
class ExecutedModel(TFModel):
    """A :class:`TFModel` whose runs follow ``execution`` (see :func:`with_execution`):
    tfparity's one runner, for the checks and the sweep alike.

    Three paths, each compiled once (graph, XLA) into its own ``tf.function``:

    - ``ids``: ``input_ids`` (``run(batch)``); with explicit ``position_ids`` in the batch
      it is counted as the ``positions`` path;
    - ``embeds``: given ``inputs_embeds`` (``run(batch, embeds)``), cast to the compute
      dtype;
    - ``gather``: the word embeddings gathered by the batch's ids *inside* the run and fed
      as ``inputs_embeds`` (``run_gathered(batch)``): one call and no host round trip per
      batch (the sweep's embeds path; counted as ``embeds``).

    Shapes: in graph mode a path leaves batch and sequence sizes unknown, so batches of
    any shape share one trace, each call as fast as with a trace per shape. XLA compiles
    once per input shape, so the sweep gives it batches of a few fixed bucket shapes.
    Autograph is off: Hugging Face TF models branch only on static Python values, so
    converting them only made each trace slower.

    Ids are checked against the model's limits before every run, compiled or not: on
    a GPU, and under XLA, an out-of-range id would silently gather zeros.
    """

    execution: ExecutionOptions = field(default_factory=ExecutionOptions)
    _functions: dict[tuple[str, tuple[str, ...]], Any] = field(default_factory=dict, repr=False)

    def run(self, batch: Batch, inputs_embeds: Any = None) -> Trace:
        with placed(self.execution):
            return super().run(batch, inputs_embeds)

    def run_gathered(self, batch: Batch) -> Trace:
        """The ``inputs_embeds`` path, with the word embeddings gathered by the batch's
        ids inside the run (inside the compiled function when compiled)."""
        check_limits(batch, self.limits)
        with placed(self.execution):
            out = self._call("gather", batch.input_ids, self.call_kwargs(batch))
        return Trace.from_output(out)

    def forward(self, input_ids: Any, inputs_embeds: Any, kwargs: dict[str, Any]) -> Any:
        if inputs_embeds is not None:
            return self._call("embeds", self._in_compute_dtype(inputs_embeds), kwargs)
        return self._call("ids", input_ids, kwargs)

    def _in_compute_dtype(self, inputs_embeds: Any) -> Any:
        """HF TF models add ``inputs_embeds`` to position embeddings without casting, so
        under a mixed policy float32 embeddings fail; cast them as the ids path does."""
        tf = import_tf()
        dtype = getattr(self.model, "compute_dtype", None) or "float32"
        return tf.cast(inputs_embeds, dtype)

    def gather(self, input_ids: Any) -> Any:
        with placed(self.execution):
            return super().gather(input_ids)

    def eager(self) -> ExecutedModel:
        """The same model, device and precision, run eagerly: sub-layer taps record
        Python-side calls, which a traced function would not repeat."""
        if not self.execution.compiled:
            return self
        options = replace(self.execution, graph=False, xla=False)
        return replace(self, execution=options, _functions={})

    @property
    def traces(self) -> int:
        """Traces made so far by the compiled paths (0 when eager)."""
        return sum(self.traces_by_path().values())

    def traces_by_path(self) -> dict[str, int]:
        """Traces per path: ``ids``, ``embeds`` (given or gathered), ``positions``."""
        counts: dict[str, int] = {}
        for (kind, keys), fn in self._functions.items():
            label = _path_label(kind, keys)
            counts[label] = counts.get(label, 0) + int(fn.experimental_get_tracing_count())
        return counts

    def _call(self, kind: str, x: Any, kwargs: dict[str, Any]) -> Any:
        """Run one path: eagerly, or through its tf.function (made once per path and set
        of call arguments, and per model, so a trace never leaks from one device or mode
        to another)."""
        if not self.execution.compiled:
            return self._eager_call(kind, x, kwargs)
        tf = import_tf()
        keys = tuple(sorted(kwargs))
        if kind != "embeds":
            x = tf.cast(x, tf.int32)
        if (kind, keys) not in self._functions:
            self._functions[(kind, keys)] = self._compile(tf, kind, keys, x.dtype)
        return self._functions[(kind, keys)](x, {k: tf.cast(kwargs[k], tf.int32) for k in keys})

    def _eager_call(self, kind: str, x: Any, kwargs: dict[str, Any]) -> Any:
        if kind == "ids":
            return TFModel.forward(self, x, None, kwargs)
        if kind == "gather":
            x = self._in_compute_dtype(import_tf().gather(self.word_embeddings(), x))
        return TFModel.forward(self, None, x, kwargs)

    def _compile(self, tf: Any, kind: str, keys: tuple[str, ...], dtype: Any) -> Any:
        def forward(x: Any, kw: dict[str, Any]) -> Any:
            return dict(self._eager_call(kind, x, kw))

        if self.execution.xla:  # XLA compiles per input shape
            return tf.function(
                forward, jit_compile=self.execution.xla, reduce_retracing=False, autograph=False
            )
        x_spec = tf.TensorSpec([None] * (3 if kind == "embeds" else 2), dtype)
        kw_spec = {k: tf.TensorSpec([None, None], tf.int32) for k in keys}
        return tf.function(forward, input_signature=[x_spec, kw_spec], autograph=False)


def _path_label(kind: str, keys: tuple[str, ...]) -> str:
    label = "embeds" if kind == "gather" else kind
    if "position_ids" in keys:
        return "positions" if label == "ids" else f"{label}+positions"
    return label


def with_execution(model: TFModel, options: ExecutionOptions) -> ExecutedModel:
    """``model`` running under ``options``; reduced precision or another device than
    the one holding its weights gives a clone (the original is left untouched)."""
    if hasattr(model, "executed"):  # a keras-hub model says what it supports itself
        return model.executed(options)
    base = model.model  # an ExecutedModel's clone holds float32 variables: cloning it works
    needs_clone = options.precision != "fp32" or not _lives_on(base, options.device)
    inner = clone_model(model, options) if needs_clone else base
    return ExecutedModel(
        name=model.name,
        model=inner,
        tokenizer=model.tokenizer,
        config=model.config,
        source=model.source,
        notes=list(model.notes),
        holdings=model.holdings,
        execution=options,
    )


def _lives_on(keras_model: Any, device: str | None) -> bool:
    if device is None or not keras_model.weights:
        return True
    return short_name(keras_model.weights[0].device) == short_name(device)
