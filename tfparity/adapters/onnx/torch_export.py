"""An ONNX file of a Hugging Face PyTorch encoder, written the way tfparity's tests and
docs make theirs: torch's legacy exporter (``dynamo=False``, which names every node by
its module path) with the outputs named as tfparity reads them (``last_hidden_state``,
``pooler_output`` or a head's ``logits``, then ``hidden_states_<k>``).

The legacy exporter names flat outputs only, so the model is wrapped to return a
tuple. For users: the same call exports a checkpoint of their own for checking.
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
    dynamo: bool = False,
) -> Path:
    """``model`` (a PyTorch BERT-style encoder, or one with a head) exported to ``path``:
    every hidden state an output (``hidden_states``), batch and sequence axes dynamic
    (``dynamic``) or fixed at ``shape``, the weights in ``<name>.onnx.data`` beside it
    (``external_data``), and taking ``inputs`` (a graph of ``input_ids`` alone has no
    attention mask). ``dynamo``: torch.export's exporter (nodes named generically, each
    with its module path in ``pkg.torch.onnx.name_scopes``) instead of the legacy one."""
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
    if dynamo:
        torch.onnx.export(
            flat, args, str(path), dynamo=True, input_names=list(inputs), output_names=outputs,
            dynamic_shapes=_dims(inputs) if dynamic else None, external_data=external_data,
            verbose=False,
        )  # fmt: skip
        return path
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


def _dims(inputs: tuple[str, ...]) -> dict[str, Any]:
    """torch.export's dynamic batch and sequence axes for each of the wrapper's inputs."""
    from torch.export import Dim

    batch, sequence = Dim("batch"), Dim("sequence")
    return {"tensors": tuple({0: batch, 1: sequence} for _ in inputs)}


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
