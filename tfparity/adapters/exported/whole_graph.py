"""What a side run whole by a runtime has in common (a LiteRT flatbuffer, an ONNX
file): the file takes token ids only, cannot be entered mid-graph, runs as it was
converted, and finds its hidden states and sub-layers inside the graph by name.

Each kind keeps its fields, its runner and how it reads a tensor; this base holds the
rules they share, so a fix to one (a head guessed, a static length, a refusal) is made
once. A subclass adds its ``runner`` and ``graph`` (``located(width)``) and sets the
phrases below.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from ...architectures.heads import Head, head_of_class
from ...errors import TfparityError
from ...inputs import Batch, Limits
from ...trace import Trace
from ..interfaces.sides import TFSideBase, config_limits
from ..runtime.execution_options import ExecutionOptions
from ..sources.holdings import Holdings
from ..sources.specs import ModelSpec


@dataclass
class WholeGraphSide(TFSideBase):
    """A file a runtime runs whole, with its companion's config and tokenizer; see the
    module docstring."""

    # "a LiteRT flatbuffer: its signature takes token ids"
    TAKES_IDS: ClassVar[str]
    # "the flatbuffer's static sequence length"
    STATIC_LENGTH: ClassVar[str]
    # "runs on the LiteRT interpreter as converted"
    RUNS_AS: ClassVar[str]

    name: str
    runner: Any  # the kind's runner: ``output_names()``, ``static``, ``run(...)``
    config: Any
    tokenizer: Any | None
    source: str = ""
    notes: list[str] = field(default_factory=list)
    spec: ModelSpec | None = None
    # it holds every weight it computes with (its pooler perhaps made up: Holdings.export)
    holdings: Holdings | None = field(default_factory=Holdings.export)
    execution: ExecutionOptions = field(default_factory=ExecutionOptions)
    # --head, else the companion spec's: what a file returning logits is checked as
    named_head: Head | None = None

    def _located(self) -> dict[str, Any]:
        return self.graph.located(int(self.config.hidden_size))

    @property
    def head(self) -> Head:
        """Base, unless the file returns logits: then the head ``--head`` names, else the
        companion's (a reference of another class is then judged by what its checkpoint
        holds: a head it lacks is exit 2, :mod:`tfparity.checks.crosscheck.checkpoints`)."""
        if not set(self.runner.output_names()) & {"logits", "start_logits"}:
            return Head.BASE
        if self.named_head is not None:
            return self.named_head
        named = (getattr(self.config, "architectures", None) or [""])[0]
        return head_of_class("TF" + named) or head_of_class(named) or self._unnamed_head()

    def _unnamed_head(self) -> Head:
        """The head of a file whose config names no class: none is known."""
        return Head.BASE

    @property
    def limits(self) -> Limits:
        """The config's limits, and no longer sequences than a static shape takes (the
        inputs are then made no longer, and the report says what was cut)."""
        limits = config_limits(self.config)
        static = self.runner.static[1]
        if static is None or (limits.max_positions and limits.max_positions <= static):
            return limits
        return replace(limits, max_positions=static, positions_source=self.STATIC_LENGTH)

    # ------------------------------------------------------------------ no embeds path

    @property
    def inputs_embeds_reason(self) -> str | None:
        return self._no_embeds()

    def _no_embeds(self) -> str:
        return (
            f"{self.name} is {self.TAKES_IDS}, so it has no inputs_embeds path to check "
            "(run the embeds check on the model it came from)."
        )

    def _refuse_embeds(self) -> None:
        raise TfparityError(self._no_embeds())

    def _run_gathered(self, batch: Batch) -> Trace:
        raise TfparityError(self._no_embeds())

    def gather(self, input_ids: np.ndarray) -> Any:
        raise TfparityError(self._no_embeds())

    def word_embeddings(self) -> Any:
        raise TfparityError(self._no_embeds())

    # ------------------------------------------------------------------ other forms

    def executed(self, options: ExecutionOptions) -> WholeGraphSide:
        """Itself: the runtime runs the file as converted. A device, XLA or another
        precision asked for is refused rather than ignored."""
        on_gpu = options.device is not None and "CPU" not in options.device.upper()
        if options.xla or options.precision != "fp32" or on_gpu:
            raise TfparityError(
                f"{self.name} {self.RUNS_AS}: --device, --xla and --precision do not apply."
            )
        return self

    def eager(self) -> WholeGraphSide:
        return self

    # ------------------------------------------------------------------ localisation

    def output_names(self, reference: Any) -> set[str]:
        """The file's outputs and the hidden states found inside it."""
        names = set(self.runner.output_names())
        names |= {k for k in self._located() if k.startswith("hidden_states[")}
        if "last_hidden_state" in names:
            names.add(f"hidden_states[{self.config.num_hidden_layers}]")
        return names

    def localisable(self) -> bool:
        """Whether the file's names give sub-layers (then they are its taps)."""
        return any(k.startswith("layer_") for k in self._located())

    def _invoke(self, batch: Batch, taps: bool) -> tuple[Trace, dict[str, np.ndarray]]:
        """Outputs and hidden states; with ``taps`` the sub-layer values too (each kind
        reads its tensors its own way, then :meth:`_traced`)."""
        raise NotImplementedError

    def _traced(
        self, inside: dict[str, np.ndarray], out: dict[str, np.ndarray]
    ) -> tuple[Trace, dict[str, np.ndarray]]:
        """The trace of one run, from the tensors read ``inside`` the graph (by hidden
        state or tap name) and its outputs ``out``; and the sub-layer records."""
        arrays = dict(inside)
        last = f"hidden_states[{self.config.num_hidden_layers}]"
        if "last_hidden_state" in out and last not in out:  # HF: they are one tensor
            arrays[last] = out["last_hidden_state"]
        arrays.update(out)
        hidden = {k: v for k, v in arrays.items() if k.startswith("hidden_states[")}
        recorded = {k: v for k, v in arrays.items() if k.startswith("layer_")}
        rest = {k: v for k, v in arrays.items() if k not in hidden and k not in recorded}
        return Trace.from_output({**hidden, **rest}), recorded

    def _tapped_run(self, batch: Batch) -> tuple[Trace, dict[str, np.ndarray]]:
        return self._invoke(batch, taps=True)

    def isolated(
        self, pt_taps: dict[str, np.ndarray], pt_hidden: list[np.ndarray], batch: Batch
    ) -> dict[str, np.ndarray]:
        """None: a file runs whole, so no sub-layer is run on PyTorch's input."""
        return {}
