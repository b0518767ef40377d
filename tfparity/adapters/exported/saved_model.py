"""A TensorFlow SavedModel as the TF side: its serving signature runs.

What wrote it does not matter (``tf.saved_model.save`` with signatures, Keras 3's
``model.export``, tf-keras's ``model.save``): tfparity loads it with
``tf.saved_model.load`` and calls its signatures, the way a server would. Inputs and
outputs are mapped by name (:mod:`.signatures`). The ``input_ids`` path is the
signature ``--signature`` names, else ``serving_default``, else the first taking ids;
the ``inputs_embeds`` path exists only where a signature takes ``inputs_embeds`` (an
export's own choice), so the embeds check on an export without one says it cannot run
(exit 2), never passes.

Per-layer comparison needs the signature to return hidden states; where it returns only
final outputs, a divergence is placed at the outputs and the report says why.

A signature without an attention mask attends to whatever it is fed, padding too: such
a side says so (``unmasked_reason``), its batches are made without padding, and a padded
batch reaching it is refused (exit 2), never run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from ...architectures import for_config
from ...architectures.heads import Head, head_of_config
from ...errors import TfparityError
from ...inputs import Batch, Limits
from ...trace import Trace
from ..interfaces.sides import TFSideBase, config_limits
from ..interfaces.weight_map import ValuesOnly, WeightMap
from ..runtime.execution import placed
from ..runtime.execution_options import ExecutionOptions
from ..runtime.imports import import_tf
from ..sources.checkpoints import Companion
from ..sources.holdings import Holdings
from ..sources.specs import ModelSpec
from .signatures import InputMap, OutputMap, TensorInfo, map_inputs, map_outputs

SERVING = "serving_default"


@dataclass(frozen=True)
class Signature:
    """One mapped signature: the concrete function, its name, how its tensors map."""

    name: str
    function: Any
    inputs: InputMap
    outputs: OutputMap

    @property
    def masks(self) -> bool:
        """Whether it takes an attention mask: without one, padding is attended to."""
        return self.inputs.takes("attention_mask")


@dataclass
class SavedModelSide(TFSideBase):
    """A loaded SavedModel's signatures with its companion's config and tokenizer."""

    name: str
    spec: ModelSpec
    loaded: Any  # the restored object: it owns the variables the signatures capture
    ids: Signature
    embeds: Signature | None
    config: Any
    tokenizer: Any | None
    head: Head = Head.BASE
    source: str = ""
    notes: list[str] = field(default_factory=list)
    # it holds every weight it computes with (its pooler perhaps made up: Holdings.export)
    holdings: Holdings | None = field(default_factory=Holdings.export)
    execution: ExecutionOptions = field(default_factory=lambda: ExecutionOptions(graph=True))

    # ------------------------------------------------------------------ facts

    @property
    def model(self) -> Any:
        return self.loaded

    @property
    def side_kind(self) -> str:
        return "a TensorFlow SavedModel"

    @property
    def limits(self) -> Limits:
        return config_limits(self.config)

    @property
    def headless_reason(self) -> str | None:
        if "logits" in self.ids.outputs.names.values():
            return None
        return f"{self.name}'s signature returns no logits, so top-1 agreement is not measured"

    @property
    def unmasked_reason(self) -> str | None:
        unmasked = [s.name for s in (self.ids, self.embeds) if s and not s.masks]
        if not unmasked:
            return None
        return f"the signature '{unmasked[0]}' takes no attention mask"

    @property
    def inputs_embeds_reason(self) -> str | None:
        if self.embeds is None:
            return (
                f"{self.name} has no signature that takes inputs_embeds (its signatures: "
                f"{', '.join(_signature_names(self.loaded))}), so its inputs_embeds path "
                "cannot run; export one (e.g. a second signature over inputs_embeds, "
                "attention_mask, token_type_ids) or compare it with PyTorch: "
                f"`tfparity crosscheck {self.spec.text} --source MODEL`."
            )
        if self._word_matrix() is None:
            return (
                f"{self.name}'s serving signature holds no [{self.config.vocab_size}, "
                f"{getattr(self.config, 'hidden_size', '?')}] word-embedding matrix to "
                "gather inputs_embeds from."
            )
        return None

    def named_weights(self) -> list[tuple[str, Any]]:
        return [(v.name, v) for v in self.ids.function.variables]

    def word_embeddings(self) -> Any:
        matrix = self._word_matrix()
        if matrix is None:
            raise TfparityError(self.inputs_embeds_reason or "no word-embedding matrix")
        return matrix

    def _word_matrix(self) -> Any:
        """The variable of shape [vocab_size, hidden_size] the ids signature captures
        (a word-named one where several have that shape), or None."""
        shape = (self.config.vocab_size, getattr(self.config, "hidden_size", None))
        found = [v for v in self.ids.function.variables if tuple(v.shape) == shape]
        worded = [v for v in found if "word" in v.name or "token" in v.name]
        return (worded or found or [None])[0]

    # ------------------------------------------------------------------ runs

    def _run(self, batch: Batch, inputs_embeds: Any) -> Trace:
        if inputs_embeds is None:
            return self._call(self.ids, batch)
        reason = self.inputs_embeds_reason
        if reason is not None or self.embeds is None:
            raise TfparityError(reason or "no inputs_embeds signature")
        return self._call(self.embeds, batch, inputs_embeds)

    def _call(self, signature: Signature, batch: Batch, embeds: Any = None) -> Trace:
        tf = import_tf()
        if not signature.masks and not batch.attention_mask.all():
            raise TfparityError(
                f"{self.name}'s signature '{signature.name}' takes no attention mask, and "
                "this batch holds padding: the model would attend to it and the comparison "
                "would be wrong. tfparity regroups its own inputs (texts, random ids) into "
                "batches of one length each; give batches without padding, each of one "
                "length (or inputs= instead of batches=)."
            )
        feed = signature.inputs.feed(batch, embeds)
        with placed(self.execution):
            out = signature.function(**{k: tf.constant(v) for k, v in feed.items()})
        return Trace.from_output(signature.outputs.arrays({k: v.numpy() for k, v in out.items()}))

    def _run_gathered(self, batch: Batch) -> Trace:
        return self._run(batch, self.gather(batch.input_ids))

    def gather(self, input_ids: np.ndarray) -> Any:
        """Rows of the export's own word-embedding matrix for ``input_ids``."""
        tf = import_tf()
        ids = np.asarray(input_ids)
        vocab = int(self.config.vocab_size)
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise TfparityError(f"input_ids hold ids outside the vocabulary (0..{vocab - 1}).")
        return tf.gather(self.word_embeddings(), ids)

    def output_names(self, reference: Any) -> set[str]:
        """The reference's tensors the signature returns a counterpart of; none is a
        usage error (a cross-check must not pass having compared nothing)."""
        mapped = self.ids.outputs.targets(list(reference))
        names = mapped & set(reference)
        if not names:
            raise TfparityError(
                f"None of {self.name}'s outputs ({', '.join(sorted(mapped))}) has a "
                f"counterpart in the PyTorch reference ({', '.join(reference)}): nothing "
                "would be compared."
            )
        return names

    def weight_map(self) -> WeightMap:
        """The export's variables by PyTorch name, where they carry the names of a
        Hugging Face TF model (an export of one); none otherwise (Keras 3 exports)."""
        from ..hf_tf.loading import tf_model_class
        from ..hf_tf.weight_names import variables_for

        if self.architecture.tf_class is None:  # no HF TF class: no HF variable names
            return WeightMap()
        prefix = tf_model_class(self.config).base_model_prefix
        return ValuesOnly(partial(variables_for, self.ids.function.variables, prefix))

    # ------------------------------------------------------------------ other forms

    def executed(self, options: ExecutionOptions) -> SavedModelSide:
        """The signatures on ``options``'s device. A SavedModel's signature is a traced
        graph in the precision it was exported in: fp16/bf16 and XLA are refused."""
        if options.precision != "fp32" or options.xla:
            raise TfparityError(
                f"{self.name} is a SavedModel: its signature runs as exported (a graph, in "
                "its own precision); --precision fp16/bf16 and --xla do not apply."
            )
        runs = replace(options, graph=True, auto=False)
        return self if runs == self.execution else replace(self, execution=runs)

    def eager(self) -> SavedModelSide:
        return self


def _signature_names(loaded: Any) -> list[str]:
    return sorted(loaded.signatures.keys())


def _info(spec: Any) -> TensorInfo:
    return TensorInfo(spec.dtype.name, tuple(spec.shape.as_list()) if spec.shape.rank else ())


def _mapped(name: str, function: Any, companion: Companion) -> Signature:
    _, kwargs = function.structured_input_signature
    inputs = {k: _info(v) for k, v in kwargs.items()}
    outputs = {k: _info(v) for k, v in function.structured_outputs.items()}
    return Signature(
        name,
        function,
        map_inputs(name, inputs),
        map_outputs(name, outputs, companion.config),
    )


def load_saved_model(
    spec: ModelSpec, companion: Companion, signature: str | None = None, head: Head | None = None
) -> SavedModelSide:
    """Load the SavedModel ``spec`` names and map its signatures (exit 2 when none can
    run: the message lists what each signature has). ``signature`` (``--signature``)
    names the one that runs the input_ids path; default: ``serving_default``, else the
    first (by name) that takes token ids. ``head``: the kind of a signature that returns
    logits (default: the companion's)."""
    tf = import_tf()
    try:
        loaded = tf.saved_model.load(spec.location)
    except Exception as exc:
        raise TfparityError(
            f"TensorFlow could not load the SavedModel {spec.text}: "
            f"{' '.join(str(exc).split())[:300]}"
        ) from exc
    signatures = dict(loaded.signatures)
    if not signatures:
        raise TfparityError(
            f"The SavedModel {spec.text} has no signatures: save it with "
            "tf.saved_model.save(model, dir, signatures=...) or Keras's model.export(dir)."
        )
    ids, embeds, notes = _choose(signatures, companion, spec, signature)
    notes += _keras_hub_note(ids, companion)
    side = SavedModelSide(
        name=spec.text,
        spec=spec,
        loaded=loaded,
        ids=ids,
        embeds=embeds,
        config=companion.config,
        tokenizer=companion.tokenizer,
        head=_head(ids, companion, head),
        source=f"SavedModel {spec.location} (signature {ids.name}); config and tokenizer "
        f"from {companion.text}",
        notes=notes,
    )
    return side


def _choose(
    signatures: dict[str, Any], companion: Companion, spec: ModelSpec, wanted: str | None
) -> tuple[Signature, Signature | None, list[str]]:
    """The ids signature (``wanted``, else serving_default first), the inputs_embeds one
    if any, and notes on what the report must say of them. A ``wanted`` signature that
    is not there, cannot be fed or takes no token ids is exit 2, never a fallback."""
    if wanted is not None and wanted not in signatures:
        raise TfparityError(
            f"The SavedModel {spec.text} has no signature '{wanted}'; its signatures: "
            f"{', '.join(sorted(signatures))}."
        )
    first = wanted or SERVING
    order = sorted(signatures, key=lambda n: (n != first, n))
    mapped, refused = [], []
    for name in order:
        try:
            mapped.append(_mapped(name, signatures[name], companion))
        except TfparityError as exc:
            if name == wanted:
                raise
            refused.append(str(exc))
    ids = next((s for s in mapped if s.inputs.takes_ids), None)
    if wanted is not None and (ids is None or ids.name != wanted):
        raise TfparityError(
            f"The signature '{wanted}' of {spec.text} takes inputs_embeds, not token ids: "
            "--signature names the one that runs input_ids (its signatures: "
            f"{', '.join(sorted(signatures))})."
        )
    if ids is None:
        raise TfparityError(
            f"No signature of the SavedModel {spec.text} can run token ids: "
            + " ".join(refused or [f"{', '.join(order)} take inputs_embeds only."])
        )
    embeds = next((s for s in mapped if s.inputs.takes_embeds), None)
    return ids, embeds, _notes(ids, embeds)


def _notes(ids: Signature, embeds: Signature | None) -> list[str]:
    out = ids.outputs
    notes = [
        f"SavedModel signature '{ids.name}' runs the input_ids path (inputs: "
        f"{', '.join(f'{k} <- {v}' for k, v in sorted(ids.inputs.fields.items()))}; outputs: "
        f"{', '.join(f'{k} -> {v}' for k, v in sorted(out.names.items()))})"
        + (f"; inputs_embeds: signature '{embeds.name}'" if embeds else "")
        + "."
    ]
    if out.by_shape:
        notes.append(f"Mapped by shape (no known name): {', '.join(out.by_shape)}.")
    if out.unmapped:
        notes.append(f"Signature outputs not compared (no counterpart): {', '.join(out.unmapped)}.")
    if not out.has_hidden_states:
        notes.append(
            f"The signature returns no hidden states ({', '.join(sorted(out.names))} only): "
            "no intermediate tensors exist, so a divergence is placed at the "
            "outputs, not at a layer. Export hidden_states_<k> to localise it."
        )
    return notes


def _keras_hub_note(ids: Signature, companion: Companion) -> list[str]:
    """keras-hub's input names say the export is of a keras-hub backbone: the known
    difference of that port, if any, explains what the outputs alone cannot place."""
    if "token_ids" not in ids.inputs.fields:
        return []
    layout = for_config(companion.config).keras_hub
    known = layout.known_difference if layout else None
    if known is None:
        return []
    return [f"A keras-hub export (token_ids, padding_mask): {known.finding}{known.rerun()}"]


def _head(ids: Signature, companion: Companion, head: Head | None = None) -> Head:
    """A base model unless the signature returns logits: then ``head`` (``--head``),
    else the companion's (a reference of another class is then judged by what its
    checkpoint holds: a head it lacks is exit 2, see
    :mod:`tfparity.checks.crosscheck.checkpoints`)."""
    if "logits" not in ids.outputs.names.values():
        return Head.BASE
    named = head or companion.head
    return named or head_of_config(getattr(companion.config, "architectures", None))
