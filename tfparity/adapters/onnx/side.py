"""The ONNX side: a ``.onnx`` file run by ONNX Runtime, checked like any TF side.

An ONNX file holds the computation and its weights but no Hugging Face config and no
tokenizer: those come from the *companion* spec (the model it was exported from, or
its PyTorch reference), as for a LiteRT flatbuffer. Hidden states are the graph's
outputs where it returns them (``hidden_states_<k>``), else its intermediate tensors put
back onto layers by name (:meth:`.graph.Graph.located`); where the names give
sub-layers, those are the cross-check's taps, so a divergence is localised inside the
file. A graph cannot be entered mid-way, so there are no isolated runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures import for_config
from ...architectures.heads import Head
from ...errors import TfparityError
from ...inputs import Batch
from ...trace import Trace
from ..exported.litert_runner import hf_name
from ..exported.whole_graph import WholeGraphSide
from ..interfaces.sides import Generator
from ..interfaces.weight_map import ValuesOnly, WeightMap
from ..runtime.execution_options import ExecutionOptions
from ..sources.checkpoints import Companion
from ..sources.specs import ModelSpec
from .cache import is_present, no_cache
from .generation import ONNXGenerator
from .graph import Graph
from .quantised import scales_text
from .runner import Runner
from .session import import_ort, read_model


def load_onnx(spec: ModelSpec, companion: Companion, head: Head | None = None) -> ONNXModel:
    """The ONNX file ``spec`` names, with ``companion``'s config and tokenizer. ``head``
    (``--head``): the kind of a graph that returns logits (default: the head the
    companion spec names, else its config's architecture)."""
    path = Path(spec.location)
    graph = Graph.read(read_model(path))
    pad_id = getattr(companion.config, "pad_token_id", None)
    runner = Runner.open(path, graph, pad_id, companion.config)
    model = ONNXModel(
        name=spec.text,
        runner=runner,
        config=companion.config,
        tokenizer=companion.tokenizer,
        source=f"ONNX file {path} (config and tokenizer: {companion.text})",
        spec=spec,
        named_head=head or companion.head,
    )
    model.notes.append(model.describe())
    return model


@dataclass
class ONNXModel(WholeGraphSide):
    """An ONNX file under test, with its companion's config and tokenizer."""

    TAKES_IDS = "an ONNX file: its graph takes token ids"
    STATIC_LENGTH = "the ONNX graph's static sequence length"
    RUNS_AS = "runs on ONNX Runtime as exported"

    # ------------------------------------------------------------------ facts

    @property
    def model(self) -> Any:
        return self.runner.session

    @property
    def graph(self) -> Graph:
        return self.runner.graph

    @property
    def side_kind(self) -> str:
        return "an ONNX file"

    @property
    def command_name(self) -> str:
        """The file and the companion it takes its config from (``--pt``), for advice."""
        inner = self.spec.inner if self.spec is not None else None
        return self.name if inner is None else f"{self.name} --pt {inner.text}"

    @property
    def framework(self) -> str:
        """ONNX Runtime and the provider its session runs on first (CUDA's where present)."""
        return f"ONNX Runtime {import_ort().__version__} ({self.runner.session.get_providers()[0]})"

    @property
    def quantisation(self) -> str | None:
        """The int8 kind the graph's operators say (None: float), judged by its budget."""
        return self.graph.quantisation()

    def _scales_on(self, layer: int | str) -> list[str]:
        """The weight scales placed on ``layer`` through the graph, each with the module
        reading it (``onnx::MatMul_286_scale (encoder.layer.1.intermediate.dense)``)."""
        return [m.named() for m in self.graph.weight_scales() if m.weight and m.layer == layer]

    def _unnamed_head(self) -> Head:
        """Logits over the vocabulary (``tiny:gpt2``'s config names no class): the
        family's language model, causal or masked; else none is known (base)."""
        width = next((p.width for p in self.graph.produced if p.name == "logits"), None)
        if width is None or width != getattr(self.config, "vocab_size", None):
            return Head.BASE
        causal = for_config(self.config).causal
        return Head.CAUSAL_LM if causal else Head.MASKED_LM

    @property
    def unmasked_reason(self) -> str | None:
        if "mask" in self.runner.inputs:
            return None
        return "the ONNX graph takes no attention mask"

    def describe(self) -> str:
        shape = "x".join("?" if d is None else str(d) for d in self.runner.static)
        kind = "dynamic" if self.runner.dynamic else "static"
        padding = "" if self.runner.dynamic else " (inputs padded to it, padding cut off)"
        inside = self._inside()
        marked = (
            f"; {len(inside)} tensors inside the graph (sub-layer outputs, hidden states "
            "it does not output) read from a copy with every intermediate tensor marked as "
            "an output and graph optimisation off (fusions would remove them)"
            if inside
            else ""
        )
        cache = self.runner.cache
        cached = (
            f" and a KV cache of {cache.layers} layers (past_key_values.* in, fed empty "
            "outside generation; present.* out)"
            if cache is not None
            else ""
        )
        return (
            f"ONNX: run by {self.framework}, {kind} input shape [{shape}]{padding}, inputs "
            f"{', '.join(self.runner.inputs.values())}{cached}; graph outputs from the optimised "
            f"session (ORT_ENABLE_ALL, as deployed){marked}{scales_text(self.graph)}."
        )

    def _inside(self) -> dict[str, str]:
        """The located tensors the graph does not output: read from the marked copy."""
        outputs = set(self.runner.graph.outputs) | set(self.runner.output_names())
        return {k: v for k, v in self._located().items() if v not in outputs and k not in outputs}

    def executed(self, options: ExecutionOptions) -> ONNXModel:
        """The file on the providers ``--device`` asks for: ``cpu`` the CPU's alone,
        ``gpu:N`` CUDA's on GPU N with the CPU's after it (exit 2 where ONNX Runtime has
        no CUDA); none named, CUDA's where present (the default). XLA or another
        precision is refused rather than ignored."""
        if options.xla or options.precision != "fp32":
            raise TfparityError(f"{self.name} {self.RUNS_AS}: --xla and --precision do not apply.")
        if options.device is None or options.device == self.runner.device:
            return self
        ran = replace(
            self,
            runner=self.runner.on(options.device),
            execution=replace(options, graph=False, auto=False),
            notes=[n for n in self.notes if not n.startswith("ONNX: run by")],
        )
        ran.notes.append(ran.describe())
        return ran

    # ------------------------------------------------------------------ runs

    def _run(self, batch: Batch, inputs_embeds: Any) -> Trace:
        trace, _ = self._invoke(batch, taps=False)
        return trace

    def _invoke(self, batch: Batch, taps: bool) -> tuple[Trace, dict[str, np.ndarray]]:
        """Outputs and hidden states; with ``taps`` the sub-layer values too."""
        outputs = set(self.runner.output_names())
        graph_outputs = set(self.graph.outputs)
        wanted = {
            k: name
            for k, name in self._located().items()
            if (taps or k.startswith("hidden_states[")) and k not in outputs
        }
        inside = tuple(sorted({n for n in wanted.values() if n not in graph_outputs}))
        out, kept = self.runner.run(batch, read=inside)
        out = {k: v for k, v in out.items() if not is_present(k)}  # the cache: no HF output
        # a tap the graph also outputs (the last layer's output) is read from the outputs
        arrays = {k: kept[n] if n in kept else out[hf_name(n)] for k, n in wanted.items()}
        return self._traced(arrays, out)

    # ------------------------------------------------------------------ generation

    def generator(self) -> Generator:
        """Greedy decoding on the graph's KV cache (:mod:`.generation`); refused (exit 2)
        for a graph without cache inputs, naming what it lacks and how to export it."""
        cache = self.runner.cache
        if cache is None:
            inputs = [i.name for i in self.graph.inputs]
            raise no_cache(self.name, inputs, list(self.graph.outputs))
        if not self.runner.dynamic:
            raise TfparityError(
                f"{self.name} has a static input shape, so no step can feed one token on "
                "its cache: export it with dynamic batch and sequence axes."
            )
        return ONNXGenerator(self, cache)

    # ------------------------------------------------------------------ localisation

    def weight_map(self) -> WeightMap:
        """The graph's float weights by PyTorch name (:meth:`.graph.Graph.weights_for`)."""
        return ValuesOnly(self.graph.weights_for, self._scales_on, self.graph.dequantised)
