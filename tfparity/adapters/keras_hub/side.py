"""The keras-hub side: a Hugging Face checkpoint converted by keras-hub's own converter
into a Keras 3 backbone (TensorFlow backend), run and tapped like an HF TF model.

:class:`KerasHubModel` offers what the checks use from
:class:`~tfparity.adapters.hf_tf.tf_model.TFModel` (``run``, ``gather``, ``limits``,
``tokenizer``, ``config``, ``word_embeddings``, taps and isolated runs), so the embeds
check and the cross-check run on it unchanged.

How the two paths run (faithful to the backbone's own graph, not a re-implementation):
the ``input_ids`` path calls the backbone; the ``inputs_embeds`` path runs the same
functional graph cut at the token embedding's output (a ``keras.Function`` from that
tensor and the other inputs to the backbone's outputs), so everything after the lookup
(Gemma's sqrt(d) scale, position and segment embeddings, norms, blocks) is the
backbone's own. Hidden states are recorded per block call during the run (see
:mod:`tfparity.architectures.keras_hub_layouts`).

Weights: the converter's ``loader.port_weight(keras_variable, hf_weight_key, hook_fn)``
calls are recorded while it converts, so each Keras variable is known by the HF weight
it came from and the hook (transpose, reshape, dtype cast) that shaped it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...architectures import Architecture, Positions, for_config
from ...architectures.heads import Head
from ...architectures.keras_hub_layouts import KerasHubLayout
from ...architectures.keras_hub_layouts import block as nth_block
from ...compare import to_numpy
from ...errors import TfparityError
from ...inputs import Batch, Limits
from ...trace import Trace
from ..hf_tf.tiny_checkpoints import spec_dir
from ..interfaces.sides import TFSideBase, config_limits
from ..interfaces.weight_map import FeedForwardWeights
from ..runtime.execution_options import ExecutionOptions, eager_only
from ..runtime.imports import import_tf
from ..sources.checkpoints import read_config, spec_tokenizer
from ..sources.holdings import Holdings
from ..sources.specs import KERAS_HUB, KERAS_HUB_EXTRA, ModelSpec, as_spec
from ..tf_common.keras_weights import feed_forward_weights
from ..tf_common.quantize import embedding_rows
from .checkpoints import (
    checkpoint_of,
    preset_backbone,
    preset_causal_lm,
    preset_config,
    preset_fields,
    preset_loaded,
)
from .forward import ForwardStrategy, InProcess
from .ports import Ported, PortMap, rebound, recording_ports
from .taps import BlockRecording


def import_keras_hub() -> Any:
    """``keras_hub`` on Keras 3 with the TensorFlow backend (set before Keras is first
    imported; a different backend chosen explicitly is refused: exit 2)."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import_tf()
    try:
        import keras
        import keras_hub
    except ImportError as exc:
        raise TfparityError(
            f"keras-hub specs need keras>=3 and keras-hub ({exc}): {KERAS_HUB_EXTRA}"
        ) from exc
    if keras.backend.backend() != "tensorflow":
        raise TfparityError(
            f"keras-hub models run here on the TensorFlow backend, but Keras uses "
            f"'{keras.backend.backend()}' (KERAS_BACKEND). Unset it or set "
            "KERAS_BACKEND=tensorflow."
        )
    return keras_hub


def is_keras_hub_spec(spec: Any) -> bool:
    return isinstance(spec, str) and spec.strip().startswith(KERAS_HUB)


# ----------------------------------------------------------------------------- loading


def load_keras_hub(text: str | ModelSpec) -> KerasHubModel:
    """Convert the checkpoint a ``keras-hub:<SPEC>`` names with keras-hub's converter,
    or load the keras-hub preset directory it names."""
    spec = as_spec(text)
    text = spec.text
    if spec.kind != "keras-hub":
        raise TfparityError(f"'{text}' is not a keras-hub spec (keras-hub:<SPEC>).")
    keras_hub = import_keras_hub()
    directory, preset = checkpoint_of(spec)
    saved = preset_backbone(directory) if preset else None  # exit 2 before loading
    task = preset_causal_lm(keras_hub, directory) if preset else None
    try:
        with recording_ports() as ports:
            if task is None:
                backbone = keras_hub.models.Backbone.from_preset(str(directory))
            else:  # loaded whole: a quantised task's preset loads no other way
                backbone = task.from_preset(str(directory), preprocessor=None).backbone
    except TfparityError:
        raise
    except Exception as exc:
        raise TfparityError(
            f"keras-hub could not convert {directory}: {' '.join(str(exc).split())[:300]}"
        ) from exc
    stated = None if saved is None else preset_fields(saved, backbone)
    hf_config = read_config(directory) if saved is None else preset_config(saved, stated)
    layout = for_config(hf_config).keras_hub
    notes: list[str] = []
    if layout is None:
        notes.append(
            f"tfparity has no keras-hub layout for {hf_config.model_type}: hidden states "
            "are compared, the divergence is localised to a layer."
        )
    if preset:
        notes.append(PRESET_NOTE)
    if task is not None:
        notes.append(preset_loaded(task))
    model = KerasHubModel(
        name=text,
        backbone=backbone,
        tokenizer=None if preset else spec_tokenizer(spec.inner, directory),
        hf_config=hf_config,
        layout=layout,
        ports=ports,
        source=f"keras-hub {keras_hub.__version__} {type(backbone).__name__} from {directory}",
        notes=notes,
        stated=stated,
        spec=spec,
    )
    model.notes.append(model.how_embeds_run())
    return model


def backbone_side(
    backbone: Any,
    *,
    name: str,
    source: str,
    notes: list[str],
    tokenizer: Any = None,
    spec: ModelSpec | None = None,
) -> KerasHubModel:
    """A keras-hub backbone held as an object (from a ``.keras`` file, or the user's),
    as the keras-hub side: its Hugging Face config read from its own structure, as for
    a preset (bind it to a checkpoint with :meth:`KerasHubModel.with_reference`); exit 2
    for a backbone tfparity cannot map onto transformers."""
    from ...architectures import keras_hub_backbones

    kind = type(backbone).__name__
    arch = keras_hub_backbones().get(kind)
    if arch is None or arch.keras_hub is None:
        raise TfparityError(
            f"{name} is a {kind}, which tfparity cannot map onto a transformers model; "
            f"supported backbones: {', '.join(sorted(keras_hub_backbones()))}."
        )
    saved = {"class_name": kind, "config": backbone.get_config()}
    stated = preset_fields(saved, backbone)
    side = KerasHubModel(
        name=name,
        backbone=backbone,
        tokenizer=tokenizer,
        hf_config=preset_config(saved, stated),
        layout=arch.keras_hub,
        source=source,
        notes=notes,
        stated=stated,
        spec=spec,
    )
    side.notes.append(side.how_embeds_run())
    return side


PRESET_NOTE = (
    "A keras-hub preset directory: no converter ran, so its weights are not traced back "
    "to Hugging Face names (weight hints need crosscheck --pt <the checkpoint it came "
    "from>), and it has no transformers tokenizer (give --random N --seq-len L, or --pt)."
)


# ----------------------------------------------------------------------------- the model


@dataclass
class KerasHubModel(TFSideBase):
    """A keras-hub backbone with the Hugging Face config and tokenizer of its checkpoint.

    ``config`` is the HF config with the fields the backbone really uses put in
    (:attr:`KerasHubLayout.effective_config`), so config hints compare what runs.
    """

    name: str
    backbone: Any
    tokenizer: Any | None
    hf_config: Any
    layout: KerasHubLayout | None
    ports: list[Ported] = field(default_factory=list)
    source: str = ""
    notes: list[str] = field(default_factory=list)
    # A keras-hub preset (no converter ran): the HF config fields it states, else None.
    stated: dict[str, Any] | None = None
    # What it runs under (always eager float32; see :meth:`executed`).
    execution: ExecutionOptions = field(default_factory=ExecutionOptions)
    spec: ModelSpec | None = None
    # A mixed-mode quantised file: each quantised part's Keras mode ({0: "int4", ...})
    layer_modes: dict[int | str, str] = field(default_factory=dict)
    # Where its forward pass, gradients and generation are computed: here, or in a
    # backend's worker (:mod:`.forward`); the rest of the side is the same either way.
    strategy: ForwardStrategy = field(default_factory=InProcess)
    _embeds_fn: Any = None

    # ------------------------------------------------------------------ facts

    @property
    def model(self) -> Any:
        return self.backbone

    @property
    def head(self) -> Head:
        """A keras-hub backbone is a base model (its causal-LM task is
        :class:`~.task.KerasHubCausalLM`)."""
        return Head.BASE

    # What its checkpoint held is not known (keras-hub's converter does not say); a
    # .keras file's backbone holds every weight it computes with (Holdings.export).
    holdings: Holdings | None = None

    @property
    def known_difference(self) -> Any:
        """Where keras-hub's converter for this model type really differs from
        transformers (the registry's record), or None."""
        return self.layout.known_difference if self.layout else None

    @property
    def config(self) -> Any:
        changes = self.layout.effective_config(self.backbone) if self.layout else {}
        base = self.hf_config
        return base.__class__.from_dict({**base.to_dict(), **changes})

    @property
    def model_type(self) -> str:
        return self.hf_config.model_type

    @property
    def architecture(self) -> Architecture:
        return for_config(self.hf_config)

    @property
    def quantisation(self) -> str | None:
        """``keras int8`` (etc.) for a model Keras quantised (a quantised .keras file)."""
        from ..tf_common.quantize import stored_kind

        return stored_kind(self.model)

    @property
    def framework(self) -> str:
        return self.strategy.framework

    @property
    def command_name(self) -> str:
        return self.strategy.command_name(self)

    @property
    def side_kind(self) -> str:
        return self.strategy.side_kind(self)

    @property
    def inputs_embeds_reason(self) -> str | None:
        return self.strategy.ids_only_reason(self)

    def _refuse_embeds(self) -> None:
        """Refused by name (exit 2) where the side is given token ids only."""
        if self.inputs_embeds_reason:
            raise TfparityError(f"{self.inputs_embeds_reason}.")

    def close(self) -> None:
        """End what computes it elsewhere now (a backend's worker), else at exit."""
        self.strategy.close()

    @property
    def padding_aware_positions(self) -> bool:
        return self.architecture.positions is Positions.PADDING_AWARE

    @property
    def pad_token_id(self) -> int | None:
        return getattr(self.hf_config, "pad_token_id", None)

    @property
    def headless_reason(self) -> str:
        """Why top-1 token agreement is not measured: a backbone has no LM head."""
        return (
            f"{self.name} is a keras-hub backbone ({type(self.backbone).__name__}) with no "
            "LM head, so top-1 token agreement cannot be measured (a causal LM's task: "
            "--head causal-lm)"
        )

    @property
    def ids_only_change(self) -> None:
        return None  # the embeds path is the backbone's graph after the lookup

    @property
    def limits(self) -> Limits:
        vocab = int(self.word_embeddings().shape[0])
        types = getattr(self.backbone, "num_segments", None)
        return config_limits(self.hf_config, vocab_size=vocab, type_vocab_size=types)

    def _lookup(self) -> Any:
        """The layer that embeds token ids: ``token_embedding``, or a token-and-position
        layer (RoBERTa's, GPT-2's ``embeddings``) whose ``token_embedding`` does."""
        with contextlib.suppress(ValueError):
            return self.backbone.get_layer("token_embedding")
        for layer in self.backbone.layers:
            if getattr(layer, "token_embedding", None) is not None:
                return layer
        raise TfparityError(f"{type(self.backbone).__name__} has no token embedding layer.")

    def named_weights(self) -> list[tuple[str, Any]]:
        return [(w.path, w) for w in self.backbone.weights]

    def token_embedding(self) -> Any:
        """The ``Embedding`` layer holding the word-embedding table."""
        layer = self._lookup()
        inner = getattr(layer, "token_embedding", None)
        return inner if inner is not None else layer

    def word_embeddings(self) -> Any:
        return self.token_embedding().embeddings

    def gather(self, input_ids: np.ndarray) -> Any:
        """Word embeddings for the ids, gathered from the backbone's token embedding (a
        quantised table's rows dequantised, as its lookup does: :func:`embedding_rows`)."""
        self._refuse_embeds()
        ids = np.asarray(input_ids)
        vocab = int(self.word_embeddings().shape[0])
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise TfparityError(f"input_ids hold ids outside the vocabulary (0..{vocab - 1}).")
        return embedding_rows(self.token_embedding(), ids)

    def eager(self) -> KerasHubModel:
        return self

    def forget_compiled(self) -> None:
        """Drop the traced embeds function (after a fault changed the backbone)."""
        self._embeds_fn = None

    def how_embeds_run(self) -> str:
        return (
            "keras-hub: the inputs_embeds path runs the backbone's own functional graph cut "
            "after the token lookup (keras.Function), fed the embeddings gathered from the "
            "token embedding matrix (a token-and-position layer adds its positions with its "
            "own position_embedding); hidden_states[0] is the first block's input, the "
            "last hidden state the backbone's sequence_output."
        )

    # ------------------------------------------------------------------ runs

    def inputs(self, batch: Batch) -> dict[str, Any]:
        """The backbone's inputs for a batch: token_ids, padding_mask, segment_ids."""
        names = set(self.backbone.input)
        feed = {"token_ids": np.asarray(batch.input_ids, np.int32)}
        feed["padding_mask"] = np.asarray(batch.attention_mask, np.int32)
        if "segment_ids" in names:
            types = batch.token_type_ids
            feed["segment_ids"] = (
                np.zeros_like(feed["token_ids"]) if types is None else np.asarray(types, np.int32)
            )
        if batch.position_ids is not None:
            raise TfparityError("keras-hub backbones take no position ids; leave them out.")
        return {k: v for k, v in feed.items() if k in names}

    def _run(self, batch: Batch, inputs_embeds: Any) -> Trace:
        return self.strategy.run(self, batch, inputs_embeds)

    def _run_gathered(self, batch: Batch) -> Trace:
        """The inputs_embeds path fed the word embeddings gathered by the batch's ids
        (the sweep's embeds path; eager, so there is no compiled gather to fuse)."""
        return self._run(batch, self.gather(batch.input_ids))

    def traced(
        self,
        batch: Batch,
        inputs_embeds: Any = None,
        taps: bool = False,
        substitute: dict[str, np.ndarray] | None = None,
        block_inputs: list[np.ndarray] | None = None,
    ) -> tuple[Trace, dict[str, np.ndarray]]:
        feed = self.inputs(batch)
        with BlockRecording(self.backbone, self.layout, taps, substitute, block_inputs) as rec:
            out = self.forward(feed, inputs_embeds)
        return self.trace_of(out, rec.hidden_states()), rec.taps

    def forward(self, feed: dict[str, Any], inputs_embeds: Any = None) -> dict[str, Any]:
        """The backbone's outputs (``sequence_output``, ``pooled_output`` where it has
        one) as tensors, on the ids path or the graph cut after the token lookup."""
        if inputs_embeds is None:
            out = self.backbone(feed, training=False)
        else:
            out = self._embeds_function()(self._embeds_feed(feed, inputs_embeds))
        return out if isinstance(out, dict) else {"sequence_output": out}  # GPT-2's: a tensor

    def trace_of(self, out: dict[str, Any], hidden: list[np.ndarray]) -> Trace:
        """A run's Trace in Hugging Face's names: the recorded hidden states (the last
        one the backbone's sequence_output, after the final norm), last_hidden_state and
        pooler_output."""
        arrays = {f"hidden_states[{k}]": v for k, v in enumerate(hidden)}
        seq = to_numpy(out["sequence_output"])
        if arrays:
            arrays[f"hidden_states[{len(arrays) - 1}]"] = seq
        arrays["last_hidden_state"] = seq
        if "pooled_output" in out:
            arrays["pooler_output"] = to_numpy(out["pooled_output"])
        return Trace(arrays)

    def _embeds_function(self) -> Any:
        if self._embeds_fn is None:
            import keras

            bb = self.backbone
            cut = self._lookup().output
            others = [bb.input[k] for k in bb.input if k != "token_ids"]
            self._embeds_fn = (
                keras.Function([cut, *others], bb.output),
                [k for k in bb.input if k != "token_ids"],
            )
        return lambda feed: self._embeds_fn[0](feed)

    def _embeds_feed(self, feed: dict[str, Any], embeds: Any) -> list[Any]:
        self._embeds_function()
        layer = self._lookup()
        positions = getattr(layer, "position_embedding", None)
        if getattr(layer, "token_embedding", None) is not None and positions is not None:
            # A token-and-position layer: the graph is cut after it, so its position
            # half runs here, with its own sub-layer, as its call does.
            embeds = embeds + positions(embeds)
        return [embeds, *[feed[k] for k in self._embeds_fn[1]]]

    def _gradients(
        self, batch: Batch, objective: Any, embeds: bool, embeds_fn: Any, reference: Any
    ) -> Any:
        """The gradients check's scalar differentiated where the side computes
        (:meth:`.forward.InProcess.gradients`), weights by PyTorch name where
        ``reference`` (PyTorch's weights by name) is given."""
        return self.strategy.gradients(self, batch, objective, embeds, embeds_fn, reference)

    def generator(self) -> Any:
        return self.strategy.generator(self)

    def in_process_generator(self) -> Any:
        """Refused, as for any side without an LM head (a causal LM's task generates)."""
        return super().generator()

    def output_names(self, reference: Any) -> set[str]:
        """The reference's tensors this backbone has a counterpart of (a keras-hub
        backbone has no pooler where HF's RoBERTa has one)."""
        names = {k for k in reference if k.startswith("hidden_states[")}
        names.add("last_hidden_state")
        outputs = self.backbone.output
        if isinstance(outputs, dict) and "pooled_output" in outputs:
            names.add("pooler_output")
        return names

    # ------------------------------------------------------------------ localisation

    def localisable(self) -> bool:
        taps = self.layout is not None and self.layout.block_taps is not None
        return self.strategy.here and taps

    def _tapped_run(self, batch: Batch) -> tuple[Trace, dict[str, np.ndarray]]:
        return self.traced(batch, taps=True)

    def isolated(
        self, pt_taps: dict[str, np.ndarray], pt_hidden: list[np.ndarray], batch: Batch
    ) -> dict[str, np.ndarray]:
        """Each component run on PyTorch's own input: every block is fed PyTorch's
        hidden state, and each tapped value is recorded, then replaced by PyTorch's, so
        the next component gets PyTorch's input too (nobuco's approach, in one run).
        Llama-style blocks add the attention residual from their own sum, so there the
        output component carries the attention's own (small) error."""
        _, recorded = self.traced(batch, taps=True, substitute=pt_taps, block_inputs=pt_hidden)
        return recorded

    def weight_map(self) -> PortMap:
        """Its weights through keras-hub's converter's record (:class:`.ports.PortMap`)."""
        return PortMap(self.ports, self._feed_forward)

    def _feed_forward(self, layer: int) -> FeedForwardWeights | None:
        if self.layout is None or self.layout.feed_forward is None:
            return None
        return feed_forward_weights(self.layout.feed_forward(nth_block(self.backbone, layer)))

    def reloaded(self) -> KerasHubModel | None:
        """The backbone after keras-hub's own ``save_to_preset`` and ``from_preset``
        (the keras-hub counterpart of save_pretrained + reload)."""
        if not self.strategy.here:  # the worker's model has no reload pass
            return None
        import tempfile

        keras_hub = import_keras_hub()
        with tempfile.TemporaryDirectory(prefix="tfparity-preset-") as tmp:
            self.backbone.save_to_preset(tmp)
            backbone = keras_hub.models.Backbone.from_preset(tmp)
        return KerasHubModel(
            name=f"{self.name} (save_to_preset and reloaded)",
            backbone=backbone,
            tokenizer=self.tokenizer,
            hf_config=self.hf_config,
            layout=self.layout,
            ports=rebound(self.ports, backbone.weights),
            source=f"{self.source}, saved with save_to_preset and reloaded",
            notes=list(self.notes),
            stated=self.stated,
            spec=self.spec,
        )

    def with_reference(self, pt_spec: str | ModelSpec) -> KerasHubModel:
        """A preset bound to the checkpoint its PyTorch reference names (``--pt``): that
        checkpoint's tokenizer, its config for the fields the preset does not state
        (token ids, a rotary model's maximum length), and the converter's mapping
        recovered by converting it into a throwaway backbone while recording
        ``port_weight`` calls, each re-bound to this backbone's variable of the same path
        (as :meth:`reloaded` does). Where keras-hub cannot convert it, or the paths do
        not match (another architecture), there are no weight hints (the preset's note
        says so). Not a preset, or already bound: itself."""
        given = as_spec(pt_spec)
        spec = given.inner if given.kind == "keras-hub" else given
        if self.stated is None or self.ports or spec is None:
            return self
        directory = spec_dir(spec)
        try:
            with recording_ports() as ports:
                import_keras_hub().models.Backbone.from_preset(str(directory))
        except Exception:  # keras-hub cannot convert it: no weight hints
            ports = []
        bound = rebound(ports, self.backbone.weights, same_shape=True)
        notes = list(self.notes)
        if bound and PRESET_NOTE not in notes:  # a backbone from a .keras file
            notes.append(
                f"Weight hints follow keras-hub's converter run on {given.text} ({len(bound)} "
                f"of {len(ports)} ported variables matched this backbone's by path)."
            )
        elif bound:
            notes[notes.index(PRESET_NOTE)] = (
                f"A keras-hub preset directory: weight hints follow keras-hub's converter "
                f"run on {given.text} ({len(bound)} of {len(ports)} ported variables matched "
                "this backbone's by path); the tokenizer, and the config fields the preset "
                "does not state, are that checkpoint's."
            )
        hf_config = self.hf_config
        reference = read_config(directory)
        if type(reference) is type(hf_config):  # the checkpoint of the same family
            hf_config = reference.__class__.from_dict({**reference.to_dict(), **self.stated})
        return replace(
            self,
            tokenizer=self.tokenizer or spec_tokenizer(spec, directory),
            hf_config=hf_config,
            ports=bound,
            notes=notes,
        )

    def executed(self, options: ExecutionOptions) -> KerasHubModel:
        """This model under an ExecutionOptions: eager float32 on TensorFlow's default
        placement only; anything else asked for explicitly is exit 2, never ignored."""
        runs = eager_only(options, self.strategy.models)
        return self if runs == self.execution else replace(self, execution=runs)
