"""What every TF side and every reference answers: the two declared interfaces.

Checks, orchestration, the API and the sweep talk to a model only through these, so a
new kind of TF side (a SavedModel, a LiteRT flatbuffer, a user's own Keras model) is one
class that implements :class:`TFSide`, not a new branch in every caller. A side that
lacks a capability says so through the answer (``localisable()`` False, ``reloaded()``
None, an empty ``weight_map()``), never by a missing attribute that callers would probe.

A caller tells a loaded side from anything else by its base class, :class:`TFSideBase`
(a runtime check against the Protocol would evaluate every property). It holds the
"I don't have it" answers once; each adapter overrides what it really has.

Imports stay on pure modules (no framework, no other adapter), so any module may
import this one without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ...architectures import Architecture, IdsOnlyTransform, KnownDifference, Positions, for_config
from ...architectures.heads import Head
from ...errors import TfparityError
from ...inputs import Batch, Limits, check_limits
from ...trace import Trace
from ..runtime.execution_options import ExecutionOptions
from ..sources.holdings import Holdings
from ..sources.specs import ModelSpec
from .embeddings import EmbeddingParts, LMHead, PositionFacts
from .weight_map import WeightMap

if TYPE_CHECKING:
    from .greedy import GreedyRun, SameStart


@dataclass(frozen=True)
class ForwardPass:
    """The one forward pass the cross-check localises a generation's defect in: the TF
    side and the reference it runs (the model under test, or a part of it such as a
    seq2seq model's encoder), the ids [1, seq], what the pass covers and what its
    passing means, in words, for the report."""

    tf_side: TFSide
    reference: Reference
    input_ids: np.ndarray
    covers: str  # "the teacher-forced sequence", "the encoder on the prompt"
    beyond: str  # the part past this pass's last hidden state: "head", "decoder"
    when_clean: str  # where the difference lies when this pass agrees
    # The part beyond, layer by layer, where the generator can run it (a seq2seq
    # decoder, teacher-forced): per hidden state, TF, PyTorch fp32 and PyTorch fp64
    beyond_states: Callable[[], list[tuple[np.ndarray, np.ndarray, np.ndarray]]] | None = None


class Generator(Protocol):
    """Greedy generation on a TF side, as ``tfparity generate`` judges it: the side's own
    decoding (its KV-cache path where it keeps one), each step's logits recomputed
    without a cache, and a start from gathered ``inputs_embeds`` where the side can.
    A side hands one out through :meth:`TFSide.generator` (or refuses, exit 2)."""

    keeps_cache: bool  # whether steps after the first run on a KV cache
    embeds_refusal: str | None  # why generation cannot start from inputs_embeds; None: can
    notes: list[str]  # how this side generates, in words, for the report
    decoding: str  # what the tokens are: a causal LM's continuation, a seq2seq decoder's

    def generate(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun: ...
    # A SameStart where the embeds start leaves the decoder in the ids start's state
    def generate_from_embeds(
        self, prompt: np.ndarray, new_tokens: int
    ) -> GreedyRun | SameStart: ...
    def step_logits(self, prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray: ...
    def forward_pass(
        self, reference: Reference, prompt: np.ndarray, tokens: np.ndarray
    ) -> ForwardPass: ...  # where the cross-check looks when tokens part by a defect


class TFSide(Protocol):
    """A TF or Keras model under test, as the checks see it."""

    name: str  # for reports
    spec: ModelSpec | None  # where it was loaded from; None: held in memory
    source: str  # where its weights came from, in words
    notes: list[str]
    tokenizer: Any | None
    holdings: Holdings | None  # what its checkpoint held; None: not known
    execution: ExecutionOptions  # how it runs (device, compiled, precision)

    @property
    def model(self) -> Any: ...  # the framework object (for users; checks do not reach in)
    @property
    def config(self) -> Any: ...  # the Hugging Face config of what runs
    @property
    def head(self) -> Head: ...
    @property
    def model_type(self) -> str: ...
    @property
    def architecture(self) -> Architecture: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def known_difference(self) -> KnownDifference | None: ...
    @property
    def ids_only_change(self) -> IdsOnlyTransform | None: ...
    @property
    def padding_aware_positions(self) -> bool: ...
    @property
    def pad_token_id(self) -> int | None: ...
    @property
    def headless_reason(self) -> str | None: ...  # why it has no token logits, or None
    @property
    def inputs_embeds_reason(self) -> str | None: ...  # why it cannot run inputs_embeds
    @property
    def unmasked_reason(self) -> str | None: ...  # why it cannot mask padding, or None
    @property
    def compiles(self) -> bool: ...  # whether graph/XLA execution is open to it
    @property
    def traces(self) -> int: ...
    @property
    def quantisation(self) -> str | None: ...  # what reduced precision it holds; None: float32

    layer_modes: Mapping[int | str, str]  # each part's quantisation mode, where mixed

    @property
    def framework(self) -> str: ...  # what computes it, for the report's ``compares`` line
    @property
    def command_name(self) -> str: ...  # MODEL and options that load it again, for advice

    # runs
    def run(self, batch: Batch, inputs_embeds: Any = None) -> Trace: ...
    def run_gathered(self, batch: Batch) -> Trace: ...
    def gather(self, input_ids: np.ndarray) -> Any: ...
    def word_embeddings(self) -> Any: ...
    def word_matrix(self) -> np.ndarray: ...
    def named_weights(self) -> list[tuple[str, Any]]: ...  # (name, variable)
    def traces_by_path(self) -> dict[str, int]: ...

    def gradients(
        self,
        batch: Batch,
        objective: Any,
        *,
        embeds: bool = False,
        embeds_fn: Any = None,
        reference: Any = None,
    ) -> Any: ...  # a GradientRun (adapters/gradients.py)

    # other forms of the same model
    def executed(self, options: ExecutionOptions) -> TFSide: ...
    def eager(self) -> TFSide: ...
    def reloaded(self) -> TFSide | None: ...
    def with_reference(self, pt_spec: str | ModelSpec) -> TFSide: ...

    # localisation and weight hints
    def output_names(self, reference: Any) -> set[str] | None: ...
    def outputs_compared(self, trace: Trace, reference: Trace) -> Trace: ...
    def localisable(self) -> bool: ...
    def tapped_run(self, batch: Batch) -> tuple[Trace, dict[str, np.ndarray]]: ...
    def isolated(
        self, pt_taps: dict[str, np.ndarray], pt_hidden: list[np.ndarray], batch: Batch
    ) -> dict[str, np.ndarray]: ...
    def weight_map(self) -> WeightMap: ...  # its weights by PyTorch name, for hints

    # generation
    def generator(self) -> Generator: ...  # exit 2 where the side cannot generate

    # what it takes from its reference when it is paired with one (a model of one's own:
    # the reference's config and tokenizer); itself for the others
    def bound(self, pt: Any) -> TFSide: ...

    # what only some sides can read off their model (the Hugging Face TF side); the
    # others refuse by name (exit 2)
    def lm_head(self) -> LMHead | None: ...  # None: a base model, no output embeddings
    def with_lm_head(self, *, allow_pickle: bool = False) -> TFSide: ...  # where one is held
    def embedding_parts(self) -> EmbeddingParts: ...
    def position_facts(self) -> PositionFacts: ...
    def default_position_ids(self, input_ids: np.ndarray) -> np.ndarray: ...


class Reference(Protocol):
    """The PyTorch side a TF side is judged against: a live model, or stored outputs."""

    name: str
    notes: list[str]
    holdings: Holdings | None
    # Config fields it runs with instead of its checkpoint's (--pt-config): field ->
    # (the checkpoint's value, its own); empty for the checkpoint's own config.
    config_changes: dict[str, tuple[Any, Any]]

    @property
    def framework(self) -> str: ...  # "PyTorch", or the float flatbuffer's kind
    @property
    def config(self) -> Any: ...
    def run(self, batch: Batch, *, float64: bool = False) -> Trace: ...
    def recorded(
        self, batch: Batch, *, float64: bool = False, tapped: bool = False
    ) -> tuple[Trace, dict[str, np.ndarray]]: ...
    def localisable(self) -> bool: ...  # whether recorded(tapped=True) has sub-layers
    def weight_scope(
        self, layer: int | str, component: str | None
    ) -> list[tuple[str, str]]: ...  # (name prefix, name part) of a component's weights
    def weights(self) -> dict[str, np.ndarray]: ...
    def named_weights(self) -> list[tuple[str, Any]]: ...  # (name, tensor); none if stored
    def head_weight_names(self) -> list[str]: ...
    def gradients_refusal(self) -> str | None: ...  # why it cannot be differentiated
    def gradients(self, batch: Batch, objective: Any, *, float64: bool = False) -> Any: ...
    def in_precision(self, precision: str) -> Reference: ...

    # greedy generation (exit 2 where the reference cannot generate: stored outputs)
    def greedy(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun: ...
    def step_logits(
        self, prompt: np.ndarray, tokens: np.ndarray, *, float64: bool = False
    ) -> np.ndarray: ...  # [len(tokens), vocab], recomputed without a cache
    def encoder(self) -> Reference: ...  # a seq2seq reference's encoder alone
    def decoder_states(
        self, input_ids: np.ndarray, decoder_input_ids: np.ndarray, *, float64: bool = False
    ) -> list[np.ndarray]: ...  # a seq2seq decoder's hidden states, teacher-forced


_UNSET: Any = object()


def config_limits(
    config: Any, *, vocab_size: int | None = None, type_vocab_size: Any = _UNSET
) -> Limits:
    """What a model of ``config`` accepts: its vocabulary (``vocab_size``: the side's own
    word matrix's rows, where it has one), its positions (RoBERTa-style ids start after
    ``padding_idx``, so fewer tokens than table rows; none for relative positions, XLNet
    and T5, whose field is 0 or negative) and token types (``type_vocab_size``: the
    side's own count, else the config's)."""
    positions = getattr(config, "max_position_embeddings", None) or getattr(
        config, "n_positions", None
    )
    table = positions if positions and positions > 0 else None
    if for_config(config).positions is Positions.PADDING_AWARE and positions:
        positions = positions - config.pad_token_id - 1
    types = (
        getattr(config, "type_vocab_size", None) if type_vocab_size is _UNSET else type_vocab_size
    )
    return Limits(
        vocab_size=int(config.vocab_size if vocab_size is None else vocab_size),
        max_positions=positions if positions and positions > 0 else None,
        type_vocab_size=types,
        position_table=table,
    )


TYING = "the embeddings check (tying)"
EMBEDDING_TABLES = "the model's embedding tables (word, position, token type, LayerNorm)"
POSITION_FACTS = "how the model encodes positions and which position ids it uses by default"


class TFSideBase:
    """The answers of a TF side that lacks a capability, stated once. Subclasses
    override what they have; nothing here is ever a silent pass: a side that cannot be
    localised says ``localisable() is False`` and the report says so."""

    # Each part's quantisation mode (layer index or ``embeddings``) where a file holds
    # several (``keras int4+int8``); empty where one mode, or none, holds.
    layer_modes: Mapping[int | str, str] = MappingProxyType({})

    # Facts of the Hugging Face config the side runs under (``self.config``).

    @property
    def model_type(self) -> str:
        return self.config.model_type  # type: ignore[attr-defined]

    @property
    def architecture(self) -> Architecture:
        return for_config(self.config)  # type: ignore[attr-defined]

    @property
    def padding_aware_positions(self) -> bool:
        return self.architecture.positions is Positions.PADDING_AWARE

    @property
    def pad_token_id(self) -> int | None:
        return getattr(self.config, "pad_token_id", None)  # type: ignore[attr-defined]

    @property
    def headless_reason(self) -> str | None:
        return None

    @property
    def inputs_embeds_reason(self) -> str | None:
        """Why this side cannot run ``inputs_embeds`` (an export whose signature does
        not take them), or None: the embeds check then refuses, never passes."""
        return None

    @property
    def unmasked_reason(self) -> str | None:
        """Why this side cannot mask padding (an export whose signature takes no attention
        mask), in words, or None: it can. Batches for a side that cannot are made without
        padding (:func:`tfparity.inputs.unpadded`), for its reference too, and the side
        refuses a padded batch (exit 2) rather than attend to the padding."""
        return None

    @property
    def compiles(self) -> bool:
        return False

    @property
    def ids_only_change(self) -> IdsOnlyTransform | None:
        return None

    @property
    def known_difference(self) -> KnownDifference | None:
        return None

    @property
    def traces(self) -> int:
        return 0

    @property
    def quantisation(self) -> str | None:
        """The reduced precision the artefact holds ("dynamic-range int8", "float16",
        ...), which the cross-check judges by budgets; None: float32, judged as such.
        A side that runs in a chosen precision says so through ``execution`` instead."""
        return None

    @property
    def framework(self) -> str:
        """What computes this side, for the report's ``compares`` line: TensorFlow (a
        keras-hub backbone on another Keras backend says which)."""
        return "TensorFlow"

    @property
    def command_name(self) -> str:
        """How a command names this side again, for the commands a report advises: its
        name, and the options it needs beside it (a keras-hub model on JAX adds
        ``--backend jax``)."""
        return self.name  # type: ignore[attr-defined]

    @property
    def side_kind(self) -> str:
        """What the user gave, in words, for the refusals ("a LiteRT flatbuffer")."""
        return f"a {type(self).__name__}"

    def bound(self, pt: Any) -> TFSide:
        """Itself: only a model of one's own takes anything (its config and tokenizer)
        from the reference it is paired with."""
        return self  # type: ignore[return-value]

    def lm_head(self) -> LMHead | None:
        raise self._not_exposed("the model's LM head and word embeddings", TYING)

    def with_lm_head(self, *, allow_pickle: bool = False) -> TFSide:
        raise self._not_exposed("the model's LM head and word embeddings", TYING)

    def embedding_parts(self) -> EmbeddingParts:
        raise self._not_exposed(EMBEDDING_TABLES, "diagnose")

    def position_facts(self) -> PositionFacts:
        raise self._not_exposed(POSITION_FACTS, "the positions check")

    def default_position_ids(self, input_ids: np.ndarray) -> np.ndarray:
        raise self._not_exposed(POSITION_FACTS, "the positions check")

    def _not_exposed(self, what: str, check: str) -> TfparityError:
        """The refusal (exit 2) of a check that reads ``what`` off the model, which only
        the Hugging Face TF side can; it names the side and what the check takes."""
        name = self.name  # type: ignore[attr-defined]
        return TfparityError(
            f"{check[0].upper()}{check[1:]} needs {what}, which {name} ({self.side_kind}) "
            "does not expose; it checks Hugging Face TF models (a MODEL spec such as "
            "tiny:bert or minilm, or a TFPreTrainedModel)."
        )

    def word_matrix(self) -> np.ndarray:
        """The word-embedding matrix's values, as numpy (checks never touch variables)."""
        return np.asarray(self.word_embeddings().numpy())  # type: ignore[attr-defined]

    def traces_by_path(self) -> dict[str, int]:
        return {}

    def named_weights(self) -> list[tuple[str, Any]]:
        """``(name, variable)`` of the weights it holds; none when they are not visible."""
        return []

    # Runs: each entry checks the batch against the side's limits, then calls the side's
    # hook, as Polygraphy's ``infer()`` calls ``infer_impl()``; sides never check again.

    def run(self, batch: Batch, inputs_embeds: Any = None) -> Trace:
        """A run with ``input_ids`` (default) or ``inputs_embeds``; all hidden states."""
        if inputs_embeds is not None:
            self._refuse_embeds()
        self.admit(batch)
        return self._run(batch, inputs_embeds)

    def run_gathered(self, batch: Batch) -> Trace:
        """The ``inputs_embeds`` path fed the word embeddings the batch's ids gather."""
        self._refuse_embeds()
        self.admit(batch)
        return self._run_gathered(batch)  # type: ignore[attr-defined]

    def tapped_run(self, batch: Batch) -> tuple[Trace, dict[str, np.ndarray]]:
        """An ``input_ids`` run and its sub-layer outputs (where ``localisable()``)."""
        self.admit(batch)
        return self._tapped_run(batch)

    def gradients(
        self,
        batch: Batch,
        objective: Any,
        *,
        embeds: bool = False,
        embeds_fn: Any = None,
        reference: Any = None,
    ) -> Any:
        """The gradients check's scalar differentiated (a ``GradientRun``), with
        ``embeds`` on ``inputs_embeds`` fed ``embeds_fn(batch)`` (default: a gather)."""
        if embeds or embeds_fn is not None:
            self._refuse_embeds()
        self.admit(batch)
        return self._gradients(batch, objective, embeds, embeds_fn, reference)

    def _refuse_embeds(self) -> None:
        """Refuse (exit 2) before the batch is read where a side has no inputs_embeds."""

    def admit(self, batch: Batch) -> None:
        """The one place a batch is checked against the side's limits (exit 2): by its
        runs, and by :func:`tfparity.inputs.make_batches` before any side sees it."""
        check_limits(batch, self.limits)  # type: ignore[attr-defined]

    def _run(self, batch: Batch, inputs_embeds: Any) -> Trace:
        raise NotImplementedError(f"{type(self).__name__} does not run")

    def _tapped_run(self, batch: Batch) -> tuple[Trace, dict[str, np.ndarray]]:
        raise NotImplementedError(f"{type(self).__name__} has no sub-layer taps")

    def _gradients(
        self, batch: Batch, objective: Any, embeds: bool, embeds_fn: Any, reference: Any
    ) -> Any:
        raise TfparityError(
            f"{self.name} ({self.side_kind}) cannot be differentiated here: the gradients "  # type: ignore[attr-defined]
            "check runs on Hugging Face TF models and keras-hub backbones."
        )

    def reloaded(self) -> TFSide | None:
        """None: this side has no save-and-reload pass (an export is already saved)."""
        return None

    def with_reference(self, pt_spec: str | ModelSpec) -> Any:
        return self

    def output_names(self, reference: Any) -> set[str] | None:
        """The reference's tensors this side has a counterpart of; None: all of them."""
        return None

    def outputs_compared(self, trace: Trace, reference: Trace) -> Trace:
        """Its run's tensors that are compared with the ``reference`` run's: all of them
        (one the reference lacks fails as missing). A model of one's own leaves out its
        outputs of its own, which the reference cannot have (a note names them)."""
        return trace

    def localisable(self) -> bool:
        return False

    def isolated(
        self, pt_taps: dict[str, np.ndarray], pt_hidden: list[np.ndarray], batch: Batch
    ) -> dict[str, np.ndarray]:
        raise NotImplementedError(f"{type(self).__name__} has no isolated runs")

    def weight_map(self) -> WeightMap:
        """None of its weights known by PyTorch name: the hints say so."""
        return WeightMap()

    def generator(self) -> Generator:
        """Refused (exit 2): this side has no greedy decoding tfparity can drive (an
        export, a user's model); the message names the kind."""
        name = self.name  # type: ignore[attr-defined]
        raise TfparityError(
            f"{name} is {self.side_kind}, which tfparity cannot generate with: "
            "`tfparity generate` drives Hugging Face TF causal LMs and T5/mT5 seq2seq LMs "
            "(HF TF generate), keras-hub CausalLM tasks (CausalLM.generate with a "
            "greedy sampler) and ONNX causal LMs exported with their KV cache."
        )


class ReferenceBase:
    """The answers of a reference that lacks a capability, stated once, each refusing by
    name (exit 2) rather than failing on a missing attribute: stored outputs (a golden
    file) cannot be differentiated nor generate, a module of one's own has no sub-layer
    taps. The live PyTorch reference overrides what it has.

    A caller tells a reference from anything else by this class, never by a concrete
    one. Subclasses hold ``name``, ``config``, ``notes``, ``holdings`` and
    ``config_changes`` (see :class:`Reference`) and their own :meth:`run`.
    """

    @property
    def reference_kind(self) -> str:
        """What kind of reference this is, in words, for the refusals."""
        return f"a {type(self).__name__}"

    @property
    def framework(self) -> str:
        """What runs the expected side, for the report's ``compares`` line."""
        return "PyTorch"

    def recorded(
        self, batch: Batch, *, float64: bool = False, tapped: bool = False
    ) -> tuple[Trace, dict[str, np.ndarray]]:
        """A run, without sub-layer taps (``localisable()`` is False)."""
        return self.run(batch, float64=float64), {}  # type: ignore[attr-defined]

    def localisable(self) -> bool:
        return False

    def weight_scope(self, layer: int | str, component: str | None) -> list[tuple[str, str]]:
        """Where a component's parameters are, by name: an architecture fact."""
        from .taps import weight_scope

        return weight_scope(self.config, layer, component)  # type: ignore[attr-defined]

    def weights(self) -> dict[str, np.ndarray]:
        """None visible: weight-level hints then say they need the live model."""
        return {}

    def named_weights(self) -> list[tuple[str, Any]]:
        return []

    def head_weight_names(self) -> list[str]:
        return []

    def in_precision(self, precision: str) -> Any:
        if precision == "fp32":
            return self
        raise TfparityError(
            f"{self._label()}: a cross-check in {precision} needs the live PyTorch model in "
            f"{precision}; give pt= a MODEL spec (on the command line: drop "
            "--load-outputs/--save-outputs)."
        )

    def gradients_refusal(self) -> str | None:
        """Why the gradients check cannot differentiate this reference; None: it can."""
        return (
            f"{self._label()}: the gradients check needs a live PyTorch model to "
            "differentiate; give pt= a MODEL spec (or a PTModel, or a Hugging Face PyTorch "
            "model)."
        )

    def gradients(self, batch: Batch, objective: Any, *, float64: bool = False) -> Any:
        raise TfparityError(self.gradients_refusal() or "")

    def greedy(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        raise self._cannot_generate()

    def step_logits(
        self, prompt: np.ndarray, tokens: np.ndarray, *, float64: bool = False
    ) -> np.ndarray:
        raise self._cannot_generate()

    def encoder(self) -> Reference:
        raise self._cannot_generate()

    def decoder_states(
        self, input_ids: np.ndarray, decoder_input_ids: np.ndarray, *, float64: bool = False
    ) -> list[np.ndarray]:
        raise self._cannot_generate()

    def _cannot_generate(self) -> TfparityError:
        return TfparityError(
            f"{self._label()}: `tfparity generate` judges TF against PyTorch generate, "
            "which needs a live Hugging Face PyTorch LM; give pt= a MODEL spec (or a "
            "PTModel)."
        )

    def _label(self) -> str:
        return f"{self.name} is {self.reference_kind}"  # type: ignore[attr-defined]
