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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures.heads import Head, head_of_class
from ...errors import TfparityError
from ...inputs import Batch, Limits
from ...trace import Trace
from ..interfaces.sides import TFSideBase, config_limits
from ..interfaces.weight_map import ValuesOnly, WeightMap
from ..runtime.execution_options import ExecutionOptions
from ..sources.checkpoints import Companion
from ..sources.holdings import Holdings
from ..sources.specs import ModelSpec
from .litert_graph import Graph
from .litert_runner import Runner, runtime_name

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
class LiteRTModel(TFSideBase):
    """A LiteRT flatbuffer under test, with its companion's config and tokenizer."""

    name: str
    runner: Runner
    graph: Graph
    config: Any
    tokenizer: Any | None
    source: str = ""
    notes: list[str] = field(default_factory=list)
    spec: ModelSpec | None = None
    # it holds every weight it computes with (its pooler perhaps made up: Holdings.export)
    holdings: Holdings | None = field(default_factory=Holdings.export)
    execution: ExecutionOptions = field(default_factory=ExecutionOptions)
    # --head, else the companion spec's: what a flatbuffer returning logits is checked as
    named_head: Head | None = None

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
    def head(self) -> Head:
        """Base, unless the flatbuffer returns logits: then the head ``--head`` names,
        else the companion's (a reference of another class is then judged by what its
        checkpoint holds: a head it lacks is exit 2, see
        :mod:`tfparity.checks.crosscheck.checkpoints`)."""
        outputs = set(self.runner.output_names())
        if not outputs & {"logits", "start_logits"}:
            return Head.BASE
        if self.named_head is not None:
            return self.named_head
        named = (getattr(self.config, "architectures", None) or [""])[0]
        return head_of_class("TF" + named) or head_of_class(named) or Head.BASE

    @property
    def limits(self) -> Limits:
        """The config's limits, and no longer sequences than the static shape takes (the
        inputs are then made no longer, and the report says what was cut)."""
        limits = config_limits(self.config)
        static = self.runner.static[1]
        if static is None:
            return limits
        most = limits.max_positions
        if most and most <= static:
            return limits
        source = "the flatbuffer's static sequence length"  # not the model's positions
        return replace(limits, max_positions=static, positions_source=source)

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
        if inputs_embeds is not None:
            raise TfparityError(self._no_embeds())
        trace, _ = self._invoke(batch, taps=False)
        return trace

    def _run_gathered(self, batch: Batch) -> Trace:
        raise TfparityError(self._no_embeds())

    def gather(self, input_ids: np.ndarray) -> Any:
        raise TfparityError(self._no_embeds())

    def word_embeddings(self) -> Any:
        raise TfparityError(self._no_embeds())

    @property
    def inputs_embeds_reason(self) -> str | None:
        return self._no_embeds()

    def _no_embeds(self) -> str:
        return (
            f"{self.name} is a LiteRT flatbuffer: its signature takes token ids, so it has "
            "no inputs_embeds path to check (run the embeds check on the model it came from)."
        )

    def _invoke(self, batch: Batch, taps: bool) -> tuple[Trace, dict[str, np.ndarray]]:
        """Outputs and hidden states; with ``taps`` the sub-layer values too."""
        located = self.graph.located(int(self.config.hidden_size))
        outputs = set(self.runner.output_names())
        wanted = {
            k: i
            for k, i in located.items()
            if (taps or k.startswith("hidden_states[")) and k not in outputs
        }
        out, kept = self.runner.run(batch, keep=tuple(sorted(set(wanted.values()))))
        arrays = {k: self.graph.tensors[i].real(kept[i]) for k, i in wanted.items()}
        last = f"hidden_states[{self.config.num_hidden_layers}]"
        if "last_hidden_state" in out and last not in out:  # HF: they are one tensor
            arrays[last] = out["last_hidden_state"]
        arrays.update(out)
        hidden = {k: v for k, v in arrays.items() if k.startswith("hidden_states[")}
        recorded = {k: v for k, v in arrays.items() if k.startswith("layer_")}
        rest = {k: v for k, v in arrays.items() if k not in hidden and k not in recorded}
        return Trace.from_output({**hidden, **rest}), recorded

    # ------------------------------------------------------------------ other forms

    def executed(self, options: ExecutionOptions) -> LiteRTModel:
        """Itself: the interpreter runs the flatbuffer as converted, on the CPU. A device,
        XLA or another precision asked for is refused rather than ignored."""
        if options.xla or options.precision != "fp32" or options.device not in (None, "cpu"):
            raise TfparityError(
                f"{self.name} runs on the LiteRT interpreter as converted: --device, --xla "
                "and --precision do not apply (a quantised or float16 flatbuffer says so itself)."
            )
        return self

    def eager(self) -> LiteRTModel:
        return self

    # ------------------------------------------------------------------ localisation

    def output_names(self, reference: Any) -> set[str]:
        """The signature's outputs and the hidden states found inside the flatbuffer."""
        names = set(self.runner.output_names())
        located = self.graph.located(int(self.config.hidden_size))
        names |= {k for k in located if k.startswith("hidden_states[")}
        if "last_hidden_state" in names:
            names.add(f"hidden_states[{self.config.num_hidden_layers}]")
        return names

    def localisable(self) -> bool:
        """Whether the flatbuffer's names give sub-layers (then they are its taps)."""
        return any(k.startswith("layer_") for k in self.graph.located(self.config.hidden_size))

    def _tapped_run(self, batch: Batch) -> tuple[Trace, dict[str, np.ndarray]]:
        return self._invoke(batch, taps=True)

    def isolated(
        self, pt_taps: dict[str, np.ndarray], pt_hidden: list[np.ndarray], batch: Batch
    ) -> dict[str, np.ndarray]:
        """None: a flatbuffer runs whole, so no sub-layer is run on PyTorch's input."""
        return {}

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
