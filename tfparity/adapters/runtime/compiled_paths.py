"""The compiled forms of a model's runs: one ``tf.function`` per path, made once.

Three paths, each compiled once (graph, XLA) into its own ``tf.function``:

- ``ids``: ``input_ids``; with explicit ``position_ids`` in the batch it is counted as
  the ``positions`` path;
- ``embeds``: given ``inputs_embeds``, cast to the compute dtype;
- ``gather``: the word embeddings gathered by the batch's ids *inside* the run and fed
  as ``inputs_embeds``: one call and no host round trip per batch (the sweep's embeds
  path; counted as ``embeds``).

Shapes: in graph mode a path leaves batch and sequence sizes unknown, so batches of any
shape share one trace, each call as fast as with a trace per shape. XLA compiles once
per input shape, so the sweep gives it batches of a few fixed bucket shapes. Autograph
is off: most Hugging Face TF models branch only on static Python values, so converting
them only made each trace slower. The few that branch on tensors (DeBERTa, Longformer)
fail to trace without it, before running anything, and are traced again with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .execution_options import ExecutionOptions
from .imports import import_tf

# (kind, x, call kwargs) -> the model's output, run eagerly
EagerCall = Callable[[str, Any, dict[str, Any]], Any]


@dataclass
class CompiledPaths:
    """The tf.functions of one model under one ExecutionOptions (made per model, so a
    trace never leaks from one device or mode to another)."""

    execution: ExecutionOptions
    eager_call: EagerCall
    functions: dict[tuple[str, tuple[str, ...]], Any] = field(default_factory=dict)

    def call(self, kind: str, x: Any, kwargs: dict[str, Any]) -> Any:
        """Run one path: eagerly, or through its tf.function (made once per path and set
        of call arguments)."""
        if not self.execution.compiled:
            return self.eager_call(kind, x, kwargs)
        tf = import_tf()
        keys = tuple(sorted(kwargs))
        if kind != "embeds":
            x = tf.cast(x, tf.int32)
        kw = {k: tf.cast(kwargs[k], tf.int32) for k in keys}
        ranks = tuple(len(kw[k].shape) for k in keys)  # [batch, seq]; XLM's lengths [batch]
        key = (kind, keys)
        if key not in self.functions:
            self.functions[key] = self._compile(tf, kind, keys, ranks, x.dtype)
        try:
            return self.functions[key](x, kw)
        except tf.errors.OperatorNotAllowedInGraphError:
            # the model branches on tensors (TF DeBERTa, Longformer): the trace failed
            # before running anything, so trace it again with autograph on
            self.functions[key] = self._compile(tf, kind, keys, ranks, x.dtype, autograph=True)
            return self.functions[key](x, kw)

    def traces_by_path(self) -> dict[str, int]:
        """Traces per path: ``ids``, ``embeds`` (given or gathered), ``positions``."""
        counts: dict[str, int] = {}
        for (kind, keys), fn in self.functions.items():
            label = path_label(kind, keys)
            counts[label] = counts.get(label, 0) + int(fn.experimental_get_tracing_count())
        return counts

    def _compile(
        self,
        tf: Any,
        kind: str,
        keys: tuple[str, ...],
        ranks: tuple[int, ...],
        dtype: Any,
        autograph: bool = False,
    ) -> Any:
        def forward(x: Any, kw: dict[str, Any]) -> Any:
            return dict(self.eager_call(kind, x, kw))

        if self.execution.xla:  # XLA compiles per input shape
            return tf.function(
                forward, jit_compile=True, reduce_retracing=False, autograph=autograph
            )
        x_spec = tf.TensorSpec([None] * (3 if kind == "embeds" else 2), dtype)
        kw_spec = {k: tf.TensorSpec([None] * r, tf.int32) for k, r in zip(keys, ranks, strict=True)}
        return tf.function(forward, input_signature=[x_spec, kw_spec], autograph=autograph)


def path_label(kind: str, keys: tuple[str, ...]) -> str:
    label = "embeds" if kind == "gather" else kind
    if "position_ids" in keys:
        return "positions" if label == "ids" else f"{label}+positions"
    return label
