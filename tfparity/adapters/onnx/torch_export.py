"""An ONNX file of a Hugging Face PyTorch encoder, written the way tfparity's tests and
docs make theirs: torch's legacy exporter (``dynamo=False``, which names every node by
its module path) with the outputs named as tfparity reads them (``last_hidden_state``,
``pooler_output`` or a head's ``logits``, then ``hidden_states_<k>``).

The legacy exporter names flat outputs only, so the model is wrapped to return a
tuple. For users: the same call exports a checkpoint of their own for checking.

:func:`export_with_cache` exports a causal LM with its KV cache for ``tfparity
generate``: flat past tensors in, logits and flat present tensors out, named as Optimum
names them (:mod:`.cache`), through the dynamo exporter (the legacy one fails on
GPT-2's causal mask).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def export_torch(
    model: Any,
    path: str | Path,
    *,
    hidden_states: bool = True,
    dynamic: bool = True,
    shape: tuple[int, int] = (2, 16),
    external_data: bool = False,
    inputs: tuple[str, ...] = INPUT_NAMES,
) -> Path:
    """``model`` (a PyTorch BERT-style encoder, or one with a head) exported to ``path``:
    every hidden state an output (``hidden_states``), batch and sequence axes dynamic
    (``dynamic``) or fixed at ``shape``, the weights in ``<name>.onnx.data`` beside it
    (``external_data``), and taking ``inputs`` (a graph of ``input_ids`` alone has no
    attention mask). By torch's legacy exporter, which names each node by its module path
    (a causal LM goes through :func:`export_with_cache`, the dynamo exporter)."""
    import torch

    path = Path(path)
    ids = torch.randint(5, 100, shape)
    given = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    args = tuple(given.get(n, torch.zeros_like(ids)) for n in inputs)
    with torch.no_grad():  # what it returns: a base model's outputs, or a head's logits
        out = model(**dict(zip(inputs, args, strict=True)))
    outputs = [k for k in ("logits", "last_hidden_state", "pooler_output") if k in out]
    if hidden_states:
        outputs += [f"hidden_states_{k}" for k in range(model.config.num_hidden_layers + 1)]
    axes = {n: {0: "batch", 1: "sequence"} for n in inputs} if dynamic else None
    flat = _flat_class()(model, hidden_states, inputs, outputs)
    torch.onnx.export(
        flat, args, str(path), dynamo=False, input_names=list(inputs),
        output_names=outputs, dynamic_axes=axes, opset_version=17,
    )  # fmt: skip
    if external_data:
        import onnx

        onnx.save_model(
            onnx.load(path), path, save_as_external_data=True, all_tensors_to_one_file=True,
            location=path.name + ".data", size_threshold=0,
        )  # fmt: skip
    return path


def export_with_cache(
    model: Any,
    path: str | Path,
    *,
    external_data: bool = False,
    shape: tuple[int, int] = (2, 3),
    past_length: int = 2,
) -> Path:
    """``model`` (a PyTorch causal LM of transformers, e.g. ``GPT2LMHeadModel``) exported
    to ``path`` with its KV cache, by torch's dynamo exporter: inputs ``input_ids``
    ``[batch, sequence]``, ``attention_mask`` ``[batch, past + sequence]`` and
    ``past_key_values.{i}.key`` / ``.value`` ``[batch, heads, past, head_dim]``; outputs
    ``logits`` and ``present.{i}.key`` / ``.value``. Batch, sequence and past axes are
    dynamic (the past may be empty: the prefill's), traced on ``shape`` and a past of
    ``past_length``; ``external_data``: the weights in ``<name>.onnx.data``."""
    import torch
    from torch.export import Dim

    from .cache import config_dims

    path = Path(path)
    config = model.config
    layers = int(config.num_hidden_layers)
    heads, width = config_dims(config)
    ids = torch.randint(5, 100, shape)
    mask = torch.ones(shape[0], past_length + shape[1], dtype=torch.int64)
    past = tuple(torch.randn(shape[0], heads, past_length, width) for _ in range(2 * layers))
    slots = [f"{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    batch, sequence, total, before = Dim("batch"), Dim("sequence"), Dim("total"), Dim("past")
    torch.onnx.export(
        _cached_class()(model.eval()).eval(), (ids, mask, *past), str(path), dynamo=True,
        input_names=["input_ids", "attention_mask", *(f"past_key_values.{s}" for s in slots)],
        output_names=["logits", *(f"present.{s}" for s in slots)],
        dynamic_shapes={
            "input_ids": {0: batch, 1: sequence}, "attention_mask": {0: batch, 1: total},
            "past": tuple({0: batch, 2: before} for _ in past),
        },
        external_data=external_data, verbose=False,
    )  # fmt: skip
    return path


def _cached_class() -> Any:
    """The wrapper taking and returning the cache as flat tensors, defined on first use."""
    import torch
    from transformers import DynamicCache

    class WithCache(torch.nn.Module):
        """A causal LM on a ``DynamicCache`` built from flat (key, value) tensors per
        layer; its logits, then each layer's present key and value."""

        def __init__(self, model: Any) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids: Any, attention_mask: Any, *past: Any) -> Any:
            pairs = [(past[i], past[i + 1]) for i in range(0, len(past), 2)]
            out = self.m(
                input_ids=input_ids,
                attention_mask=attention_mask,
                past_key_values=DynamicCache(ddp_cache_data=pairs),
                use_cache=True,
            )
            present = [
                t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)
            ]
            return (out.logits, *present)

    return WithCache


def _flat_class() -> Any:
    """The wrapper module, defined on first use: torch is imported only to export."""
    import inspect

    import torch

    class Flat(torch.nn.Module):
        """The model returning a tuple: its outputs, then each hidden state."""

        def __init__(
            self, model: Any, hidden_states: bool, inputs: tuple[str, ...], names: list[str]
        ) -> None:
            super().__init__()
            self.m, self.hidden_states, self.inputs = model, hidden_states, inputs
            self.names = [n for n in names if not n.startswith("hidden_states_")]
            # a decoder returns no cache (GPT-2's past_key_values): its outputs only
            takes_cache = "use_cache" in inspect.signature(model.forward).parameters
            self.extra = {"use_cache": False} if takes_cache else {}

        def forward(self, *tensors: Any) -> Any:
            given = dict(zip(self.inputs, tensors, strict=True))
            out = self.m(**given, **self.extra, output_hidden_states=self.hidden_states)
            hidden = tuple(out.hidden_states) if self.hidden_states else ()
            return (*(out[n] for n in self.names), *hidden)

    return Flat
