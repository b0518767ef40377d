"""The TensorFlow side: one adapter object per loaded Hugging Face TF model.

Checks never reach into ``model.bert.embeddings``; they ask this adapter for the word
embeddings, a run with ids, a run with embeddings. Architecture quirks (which call
arguments a model takes, how its embedding matrix is stored) stay in here.
"""

from __future__ import annotations

import inspect
import tempfile
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...architectures import (
    Architecture,
    IdsOnlyTransform,
    KnownDifference,
    for_config,
)
from ...architectures.heads import Head, head_of_class
from ...inputs import Batch, Limits
from ...trace import Trace
from ..interfaces.greedy import teacher_forced_decoder
from ..interfaces.sides import TFSideBase, config_limits
from ..runtime.compiled_paths import CompiledPaths
from ..runtime.devices import short_name
from ..runtime.execution import clone_model, placed, unsupported_precision
from ..runtime.execution_options import ExecutionOptions
from ..runtime.imports import import_tf
from ..sources.holdings import Holdings
from ..sources.specs import DEFAULT_MODEL, ModelSpec, as_spec
from .loading import Loaded, build, cannot_run, load_tf
from .weight_names import HFWeightMap


@dataclass
class TFModel(TFSideBase):
    """A built HF TF model with its tokenizer and what tfparity needs to know of it,
    running under ``execution`` (device, eager/graph/XLA, precision): tfparity's one
    runner for Hugging Face TF models, for the checks and the sweep alike.

    Ids are checked against the model's limits before every run, compiled or not: on
    a GPU, and under XLA, an out-of-range id would silently gather zeros.
    """

    name: str
    model: Any
    tokenizer: Any | None
    config: Any
    source: str = ""
    notes: list[str] = field(default_factory=list)
    holdings: Holdings | None = None  # what its checkpoint held; None: not known
    execution: ExecutionOptions = field(default_factory=ExecutionOptions)
    spec: ModelSpec | None = None  # None: a model held in memory
    paths: CompiledPaths = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.paths = CompiledPaths(self.execution, self._eager_call)

    @classmethod
    def load(
        cls,
        spec: str | ModelSpec = DEFAULT_MODEL,
        *,
        allow_pickle: bool = False,
        head: Head | None = None,
        lm_head: bool = False,
        decoders: bool = False,
    ) -> TFModel:
        """Load ``spec`` (docs/design.md: a directory, a cached hub id, minilm, tiny:<type>;
        a string, or the spec parsed where it entered) as the model class of kind ``head``
        (None: the one its config names); ``lm_head=True`` loads the class with the
        family's language-model head instead. ``decoders=True``: a seq2seq LM loads too,
        for the commands that run its decoder
        (:func:`~tfparity.architectures.heads.unsupported`)."""
        parsed = as_spec(spec)
        loaded: Loaded = load_tf(
            parsed, allow_pickle=allow_pickle, head=head, lm_head=lm_head, decoders=decoders
        )
        return cls(
            parsed.text,
            loaded.model,
            loaded.tokenizer,
            loaded.config,
            loaded.source,
            loaded.notes,
            loaded.holdings,
            spec=parsed,
        )

    @classmethod
    def wrap(cls, model: Any, tokenizer: Any | None = None, name: str | None = None) -> TFModel:
        """Adopt a model the user already holds (built on the spot if needed)."""
        if not model.built:
            model(model.dummy_inputs, training=False)
        return cls(name or type(model).__name__, model, tokenizer, model.config, "in memory")

    # ------------------------------------------------------------------ facts

    @property
    def compiles(self) -> bool:
        return True

    @property
    def side_kind(self) -> str:
        return "a Hugging Face TF model"

    @property
    def head(self) -> Head:
        """The kind of model class this is (base, sequence classification, ...)."""
        return head_of_class(type(self.model).__name__) or Head.BASE

    @property
    def architecture(self) -> Architecture:
        """What tfparity knows of this model's architecture (the registry's record)."""
        return for_config(self.config)

    @property
    def limits(self) -> Limits:
        return config_limits(self.config, vocab_size=int(self.word_embeddings().shape[0]))

    @property
    def known_difference(self) -> KnownDifference | None:
        """Where transformers' own TF port of this architecture really differs from its
        PyTorch model (the registry's record), or None."""
        return self.architecture.known_difference

    @property
    def ids_only_change(self) -> IdsOnlyTransform | None:
        """What the ``input_ids`` path does to gathered embeddings that the
        ``inputs_embeds`` path does not (XGLM's embedding scale), for this config."""
        from .gather import ids_only_change

        return ids_only_change(self.config)

    def embedding_layer(self) -> Any:
        """The layer that embeds ids (see :func:`.gather.embedding_layer`)."""
        from .gather import embedding_layer

        return embedding_layer(self.model)

    def named_weights(self) -> list[tuple[str, Any]]:
        return [(w.name, w) for w in self.model.weights]

    def word_embeddings(self) -> Any:
        """The word-embedding matrix ``[vocab, width]`` (a tf.Variable), found through the
        model's own ``get_input_embeddings()``."""
        from .gather import word_embedding_matrix

        return word_embedding_matrix(self.model)

    def rebuilt(self, changes: dict[str, Any]) -> TFModel:
        """This model's class rebuilt from its config with ``changes``, the same weights:
        how a config.json fault is made (the weights are right, the config that builds
        the layers around them is not)."""
        config = self.config.__class__.from_dict({**self.config.to_dict(), **changes})
        broken = type(self.model).from_config(config)
        build(broken)
        for target, source in zip(broken.weights, self.model.weights, strict=True):
            target.assign(source)
        return replace(self, name=f"{self.name} (broken)", model=broken, config=config)

    # ------------------------------------------------------------------ runs

    def call_kwargs(self, batch: Batch) -> dict[str, Any]:
        """The batch's tensors that this model's ``call`` accepts."""
        accepted = inspect.signature(self.model.call).parameters
        kwargs: dict[str, Any] = {"attention_mask": batch.attention_mask}
        if batch.token_type_ids is not None and getattr(self.config, "type_vocab_size", 0):
            kwargs["token_type_ids"] = batch.token_type_ids
        if batch.position_ids is not None:
            kwargs["position_ids"] = batch.position_ids
        if self.architecture.takes_lengths:  # the mask decides; lengths keep the shapes
            kwargs["lengths"] = batch.attention_mask.sum(axis=1)
        # a seq2seq LM's decoder, teacher-forced on the batch (empty for other models)
        kwargs.update(teacher_forced_decoder(self.config, batch.input_ids, batch.attention_mask))
        return {k: v for k, v in kwargs.items() if k in accepted}

    def _run(self, batch: Batch, inputs_embeds: Any) -> Trace:
        """Run with ``input_ids`` (default) or with ``inputs_embeds``; all hidden states
        (the ids checked against the model's limits by ``run``, in both cases)."""
        kwargs = self.call_kwargs(batch)
        with placed(self.execution):
            if inputs_embeds is None:
                out = self.paths.call("ids", batch.input_ids, kwargs)
            else:
                out = self.paths.call("embeds", self._in_compute_dtype(inputs_embeds), kwargs)
        return Trace.from_output(out)

    def _run_gathered(self, batch: Batch) -> Trace:
        """The ``inputs_embeds`` path, with the word embeddings gathered by the batch's
        ids inside the run (inside the compiled function when compiled)."""
        with placed(self.execution):
            out = self.paths.call("gather", batch.input_ids, self.call_kwargs(batch))
        return Trace.from_output(out)

    def _eager_call(self, kind: str, x: Any, kwargs: dict[str, Any]) -> Any:
        if kind == "gather":  # the rows as the ids path feeds them on
            from .gather import ids_path_rows

            rows = self._in_compute_dtype(import_tf().gather(self.word_embeddings(), x))
            x = ids_path_rows(rows, x, self.config)
        return self.forward(x, None, kwargs) if kind == "ids" else self.forward(None, x, kwargs)

    def forward(self, input_ids: Any, inputs_embeds: Any, kwargs: dict[str, Any]) -> Any:
        """One eager call of the HF model, all hidden states (what a gradient tape
        records). Its layers need the first positional argument even when it is None
        (the ``inputs_embeds`` path), so it is always passed."""
        try:
            return self.model(
                input_ids,
                inputs_embeds=inputs_embeds,
                output_hidden_states=True,
                training=False,
                **kwargs,
            )
        except NameError as exc:  # an optional package transformers skipped importing
            raise cannot_run(self.model, exc) from exc
        except (import_tf().errors.InvalidArgumentError, TypeError, ValueError) as exc:
            name, precision = type(self.model).__name__, self.execution.precision
            found = unsupported_precision(name, precision, exc, "while running")
            if found is None:
                raise
            raise found from exc

    def _in_compute_dtype(self, inputs_embeds: Any) -> Any:
        """HF TF models add ``inputs_embeds`` to position embeddings without casting, so
        under a mixed policy float32 embeddings fail; cast them as the ids path does."""
        tf = import_tf()
        return tf.cast(inputs_embeds, self.model.compute_dtype or "float32")

    def gather(self, input_ids: np.ndarray) -> Any:
        """Word embeddings for ``input_ids``, gathered on the Keras side (ids validated)."""
        from .gather import WordEmbeddingGather

        with placed(self.execution):
            return WordEmbeddingGather.from_model(self.model)(np.asarray(input_ids))

    @property
    def traces(self) -> int:
        """Traces made so far by the compiled paths (0 when eager)."""
        return sum(self.traces_by_path().values())

    def traces_by_path(self) -> dict[str, int]:
        return self.paths.traces_by_path()

    # ------------------------------------------------------------------ other forms

    def executed(self, options: ExecutionOptions) -> TFModel:
        """This model running under ``options``; reduced precision or another device
        than the one holding its weights gives a clone (this one is left untouched)."""
        if options == self.execution:
            return self
        base = self.model  # a clone holds float32 variables: cloning it again works
        needs_clone = options.precision != "fp32" or not _lives_on(base, options.device)
        inner = clone_model(base, self.config, options) if needs_clone else base
        return replace(self, model=inner, notes=list(self.notes), execution=options)

    def eager(self) -> TFModel:
        """The same model, device and precision, run eagerly: sub-layer taps record
        Python-side calls, which a traced function would not repeat."""
        if not self.execution.compiled:
            return self
        return replace(self, execution=replace(self.execution, graph=False, xla=False))

    def reloaded(self) -> TFModel:
        """This model after ``save_pretrained`` and a fresh load (catches lost weights),
        under the same execution."""
        with tempfile.TemporaryDirectory(prefix="tfparity-") as tmp:
            self.model.save_pretrained(tmp)
            # what loaded once reloads: a seq2seq LM too (its kind was allowed then)
            fresh = TFModel.load(tmp, decoders=True)
        return replace(
            fresh,
            name=f"{self.name} (saved and reloaded)",
            tokenizer=self.tokenizer,
            holdings=self.holdings,  # the same checkpoint's gaps, saved as they were
            spec=self.spec,
        ).executed(self.execution)

    def _gradients(
        self, batch: Batch, objective: Any, embeds: bool, embeds_fn: Any, reference: Any
    ) -> Any:
        """One tape run (:func:`.gradients.hf_gradients`), the embeddings made inside the
        tape. Weights are named by PyTorch name already (``reference`` is unused)."""
        from .gradients import hf_gradients

        return hf_gradients(self, batch, objective, embeds, embeds_fn)

    def generator(self) -> Any:
        """Greedy generation through HF TF ``generate``: a causal LM's
        (:class:`~.generation.HFGenerator`), or a seq2seq LM's, whose prompt feeds the
        encoder (:class:`~.seq2seq.Seq2SeqGenerator`); the check refuses a
        model with no LM head before it asks."""
        if self.head is Head.SEQ2SEQ_LM:
            from .seq2seq import Seq2SeqGenerator

            return Seq2SeqGenerator(self)
        from .generation import HFGenerator

        return HFGenerator(self)

    # ------------------------------------------------------------------ embeddings
    # What the embeddings, diagnose and positions checks read off the model (the other
    # sides refuse by name, :class:`~..interfaces.sides.TFSideBase`).

    def lm_head(self) -> Any:
        """The LM head (:class:`~..interfaces.embeddings.LMHead`), None for a base model."""
        from .lm_head import find_head

        return find_head(self)

    def with_lm_head(self, *, allow_pickle: bool = False) -> TFModel:
        """This checkpoint loaded as its family's LM-head class where the checkpoint holds
        a head (a base checkpoint would get a random one); itself otherwise, or when held
        in memory (nothing to load from)."""
        from .lm_head import checkpoint_has_head

        if self.spec is None or not checkpoint_has_head(self, self.spec.text):
            return self
        return TFModel.load(self.spec.text, allow_pickle=allow_pickle, lm_head=True)

    def embedding_parts(self) -> Any:
        """Numpy copies of its embedding tables (:mod:`.embedding_parts`)."""
        from .embedding_parts import embedding_parts

        return embedding_parts(self)

    def position_facts(self) -> Any:
        from .embedding_parts import position_facts

        return position_facts(self)

    def default_position_ids(self, input_ids: np.ndarray) -> np.ndarray:
        from .embedding_parts import default_position_ids

        return default_position_ids(self, input_ids)

    # ------------------------------------------------------------------ localisation
    # What the cross-check asks of a TF side (the keras-hub adapter answers the same).

    def localisable(self) -> bool:
        """Whether sub-layer taps and isolated runs exist for this model."""
        from ..interfaces import taps

        return taps.supported(self.config)

    def _tapped_run(self, batch: Batch) -> tuple[Trace, dict[str, np.ndarray]]:
        """An eager ``input_ids`` run and its sub-layer outputs."""
        from . import taps

        eager = self.eager()
        with taps.tf_taps(eager.model) as recorded:
            trace = eager._run(batch, None)
        return trace, recorded

    def isolated(
        self, pt_taps: dict[str, np.ndarray], pt_hidden: list[np.ndarray], batch: Batch
    ) -> dict[str, np.ndarray]:
        """Each sub-layer run on the PyTorch sub-layer's own input."""
        from . import taps

        return taps.isolate(self.model, pt_taps, pt_hidden, batch)

    def weight_map(self) -> HFWeightMap:
        """Its variables by the PyTorch names they load from (:mod:`.weight_names`)."""
        return HFWeightMap(self.model, self.config)


def _lives_on(keras_model: Any, device: str | None) -> bool:
    if device is None or not keras_model.weights:
        return True
    return short_name(keras_model.weights[0].device) == short_name(device)
