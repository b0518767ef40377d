"""The LiteRT side: a ``.tflite`` flatbuffer run by the LiteRT interpreter, checked like
any TF side.

A flatbuffer holds the computation and its weights but no Hugging Face config and no
tokenizer: those come from the *companion* spec (the model it was converted from, or
its PyTorch reference). Hidden states are the signature's outputs where it returns
them (``hidden_states_<k>``), else its intermediate tensors put back onto layers by
their TF names (:meth:`.litert_graph.Graph.located`); where the names give sub-layers,
those are the cross-check's taps, so a divergence is localised inside the flatbuffer.
A flatbuffer cannot be entered mid-graph, so there are no isolated runs.

What the artefact holds decides how it is judged: float32 by the float64 referee like
any TF side; quantised or float16 (:attr:`LiteRTModel.quantisation`) by budgets
(:mod:`tfparity.compare.budgets`), which the report says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures.heads import Head
from ...errors import TfparityError
from ...inputs import Batch
from ...trace import Trace
from ..interfaces.weight_map import ValuesOnly, WeightMap
from ..sources.checkpoints import Companion
from ..sources.specs import ModelSpec
from .litert_graph import Graph
from .litert_runner import Runner, runtime_name
from .whole_graph import WholeGraphSide

_KERNEL = re.compile(r"^(.*?)/(?:Tensordot/)?MatMul$")
_BIAS = re.compile(r"^(.*)/BiasAdd$")


def load_litert(
    spec: ModelSpec, companion: Companion, signature: str | None = None, head: Head | None = None
) -> LiteRTModel:
    """The flatbuffer ``spec`` names, with ``companion``'s config and tokenizer, run
    through ``signature`` (default: serving_default, else its first). ``head``
    (``--head``): the kind of a flatbuffer that returns logits (default: the head the
    companion spec names, else its config's architecture)."""
    config, tokenizer, origin = companion.config, companion.tokenizer, companion.text
    path = Path(spec.location)
    data = path.read_bytes()
    if data[4:8] != b"TFL3":  # the schema's file identifier, which every converter writes
        raise TfparityError(
            f"{spec.text} is not a LiteRT flatbuffer (its bytes 4-8 are not the TFL3 "
            "identifier): name the .tflite file tf.lite.TFLiteConverter wrote."
        )
    graph = Graph.read(data)
    runner = Runner.open(path, getattr(config, "pad_token_id", None), signature)
    model = LiteRTModel(
        name=spec.text,
        runner=runner,
        graph=graph,
        config=config,
        tokenizer=tokenizer,
        source=f"LiteRT flatbuffer {path} (config and tokenizer: {origin})",
        spec=spec,
        named_head=head or companion.head,
    )
    model.notes.append(model.describe())
    return model


@dataclass
class LiteRTModel(WholeGraphSide):
    """A LiteRT flatbuffer under test, with its companion's config and tokenizer."""

    TAKES_IDS = "a LiteRT flatbuffer: its signature takes token ids"
    STATIC_LENGTH = "the flatbuffer's static sequence length"  # not the model's positions
    RUNS_AS = (
        "runs on the LiteRT interpreter as converted (a quantised or float16 flatbuffer "
        "says so itself)"
    )

    graph: Graph = field(kw_only=True)

    # ------------------------------------------------------------------ facts

    @property
    def model(self) -> Any:
        return self.runner.interpreter(keep=False)

    @property
    def side_kind(self) -> str:
        return "a LiteRT flatbuffer"

    @property
    def quantisation(self) -> str | None:
        """The reduced precision read from the artefact (None: float32 throughout)."""
        return self.graph.quantisation()

    @property
    def unmasked_reason(self) -> str | None:
        if "mask" in self.runner.inputs:
            return None
        return f"the LiteRT signature '{self.runner.signature}' takes no attention mask"

    def describe(self) -> str:
        static = "x".join("?" if d is None else str(d) for d in self.runner.static)
        kind = self.quantisation or "float32"
        return (
            f"LiteRT: run by {runtime_name()} through signature '{self.runner.signature}', "
            f"static input shape [{static}] (inputs padded to it, padding cut from every "
            f"output before comparing); the artefact is {kind}."
        )

    # ------------------------------------------------------------------ runs

    def _run(self, batch: Batch, inputs_embeds: Any) -> Trace:
        trace, _ = self._invoke(batch, taps=False)
        return trace

    def _invoke(self, batch: Batch, taps: bool) -> tuple[Trace, dict[str, np.ndarray]]:
        """Outputs and hidden states; with ``taps`` the sub-layer values too."""
        located = self._located()
        outputs = set(self.runner.output_names())
        wanted = {
            k: i
            for k, i in located.items()
            if (taps or k.startswith("hidden_states[")) and k not in outputs
        }
        out, kept = self.runner.run(batch, keep=tuple(sorted(set(wanted.values()))))
        arrays = {k: self.graph.tensors[i].real(kept[i]) for k, i in wanted.items()}
        return self._traced(arrays, out)

    # ------------------------------------------------------------------ localisation

    def weight_map(self) -> WeightMap:
        """The float32 dense kernels and biases held as constants, by PyTorch name (a
        fully-connected weight is stored ``[out, in]``, PyTorch's layout). A quantised
        flatbuffer's weights are not compared: they differ by design."""
        return WeightMap() if self.quantisation is not None else ValuesOnly(self._constants)

    def _constants(self, pt_weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from transformers.modeling_tf_pytorch_utils import (
            convert_tf_weight_name_to_pt_weight_name,
        )

        interpreter = self.runner.interpreter(keep=False)
        found = {}
        for t in self.graph.tensors:
            if not t.constant or t.dtype != "FLOAT32" or ";" in t.name:
                continue
            kernel, bias = _KERNEL.match(t.name), _BIAS.match(t.name)
            if not (kernel or bias) or len(t.shape) != (2 if kernel else 1):
                continue
            tf_name = (kernel or bias).group(1) + ("/kernel:0" if kernel else "/bias:0")
            pt_name, _ = convert_tf_weight_name_to_pt_weight_name(tf_name, tf_weight_shape=t.shape)
            for name in (pt_name, pt_name.split(".", 1)[-1]):
                if name in pt_weights:
                    found[name] = np.array(interpreter.get_tensor(t.index))
        return found
