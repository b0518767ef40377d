"""keras-hub's causal-LM task models as a TF side: the ``keras_hub.models.CausalLM``
subclass whose ``backbone_cls`` is the converted backbone's class (as keras-hub's
``from_preset`` picks it), built around that backbone with ``preprocessor=None``.

The logits are the task's own computation: the side calls the task, whose head reads
the backbone's output (the token embedding reversed: keras-hub's converters port an
untied ``lm_head.weight`` into ``token_embedding.reverse_embeddings``, a tied model
reuses the token embedding). The hidden states are recorded per block call as for the
backbone (:class:`~.taps.BlockRecording`), the last one the backbone's
``sequence_output`` as the task's graph passes it to the head. The ``inputs_embeds``
path runs the same task with the token lookup's output replaced by the embeddings fed
(its ids are zeros, so nothing else reads them): everything after the lookup, head
included, is keras-hub's.

Which side a ``keras-hub:`` spec gives (:func:`load_keras_hub_side`): ``--head`` (or a
tiny spec's ``/<head>``) decides; without one, a checkpoint whose
``config.architectures`` names a causal LM is its task, anything else its backbone
(``tiny:<type>`` is the base model on every side, as without ``keras-hub:``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures.heads import Head, head_of_config
from ...compare import to_numpy
from ...errors import TfparityError
from ...trace import Trace
from ..runtime.imports import import_tf
from ..sources.specs import ModelSpec, as_spec
from .checkpoints import preset_causal_lm
from .side import KerasHubModel, import_keras_hub, load_keras_hub

TASK_HEADS = (Head.BASE, Head.CAUSAL_LM)


def load_keras_hub_side(text: str | ModelSpec, head: Head | None = None) -> KerasHubModel:
    """The keras-hub side ``text`` names: its backbone, or its causal-LM task where
    ``head`` (else the spec, else the checkpoint's config) says so; exit 2 for a head
    keras-hub's side does not check, before anything loads."""
    spec = as_spec(text)
    text = spec.text
    asked = head or (spec.inner.head if spec.inner is not None else None)
    if asked is not None and asked not in TASK_HEADS:
        raise TfparityError(
            f"{text} with head {asked.value}: keras-hub's converters port a checkpoint's "
            "backbone only (a keras-hub task built from it gets its head at random), so a "
            "keras-hub model is checked as its backbone (--head base; the checkpoint's "
            "head is then left out) or its causal LM task (--head causal-lm), whose head "
            "is the ported token embedding or lm_head."
        )
    side = load_keras_hub(spec)
    kind = asked or default_head(spec, side.hf_config)
    if kind is not Head.BASE:
        return causal_lm_side(side)
    left_out = checkpoint_head_left_out(spec, side.hf_config)
    if left_out is not None:
        side.notes.append(left_out)
    return side


def checkpoint_head_left_out(spec: ModelSpec, hf_config: Any) -> str | None:
    """The note for a checkpoint with a head (``config.architectures``: a classifier,
    QA, ...) checked as its backbone: the head is left out, never passed. None for a
    checkpoint with none, a preset (no architectures) and ``tiny:<type>`` (the base model
    by convention)."""
    if spec.inner is None or spec.inner.kind == "tiny":
        return None
    named = head_of_config(getattr(hf_config, "architectures", None))
    if named is Head.BASE:
        return None
    classes = ", ".join(hf_config.architectures)
    return (
        f"The checkpoint is a {classes} ({named.value}); keras-hub's converter ports its "
        "backbone only, so the backbone is checked against the checkpoint's base model and "
        f"the checkpoint's {named.value} head is not checked. A keras-hub task built from "
        "this checkpoint would get that head at random."
    )


def default_head(spec: ModelSpec, hf_config: Any) -> Head:
    """A causal LM where the checkpoint's ``config.architectures`` names one, or a
    preset was saved from a ``CausalLM`` task (its ``task.json``), else the backbone;
    ``tiny:<type>`` and a backbone's preset are the base model unless a head is named."""
    if spec.inner is None:
        task = preset_causal_lm(import_keras_hub(), Path(spec.location))
        return Head.BASE if task is None else Head.CAUSAL_LM
    if spec.inner.kind == "tiny":
        return Head.BASE
    named = head_of_config(hf_config.architectures)
    return named if named is Head.CAUSAL_LM else Head.BASE


def task_class(backbone: Any) -> Any:
    """The ``keras_hub.models.CausalLM`` subclass built on ``backbone``'s class (its
    ``backbone_cls``), as keras-hub's ``from_preset`` finds it; exit 2 where there is
    none (an encoder's backbone)."""
    keras_hub = import_keras_hub()
    base = keras_hub.models.CausalLM
    found = {
        id(cls): cls
        for name in sorted(dir(keras_hub.models))
        if isinstance(cls := vars(keras_hub.models).get(name), type)
        and issubclass(cls, base)
        and cls.backbone_cls is type(backbone)
    }
    if not found:
        raise TfparityError(
            f"keras-hub has no CausalLM task for {type(backbone).__name__}, so there is no "
            "LM head to check: --head base checks the backbone."
        )
    return next(iter(found.values()))


def causal_lm_side(side: KerasHubModel, cls: Any = None) -> KerasHubCausalLM:
    """``side``'s backbone inside its keras-hub causal-LM task (``preprocessor=None``):
    ``cls`` (a stored task's own class), else the one keras-hub's ``from_preset`` picks."""
    cls = cls or task_class(side.backbone)
    task = cls(backbone=side.backbone, preprocessor=None)
    values = {f.name: getattr(side, f.name) for f in fields(side) if f.init}
    lm = KerasHubCausalLM(**values, task=task)
    lm.source = f"{side.source}, in {cls.__name__} (preprocessor=None)"
    lm.notes = [n for n in side.notes if n != side.how_embeds_run()]
    if lm.how_embeds_run() not in lm.notes:
        lm.notes.append(lm.how_embeds_run())
    return lm


def head_variables(task: Any) -> list[str]:
    """The paths of a keras-hub task's variables that are not its backbone's: its head's
    own weights (a ``TextClassifier``'s dense layers). A ``CausalLM``'s head is the
    backbone's token embedding (or its ``reverse_embeddings``): none of its own."""
    inside = {id(v) for v in task.backbone.weights}
    return [v.path for v in task.weights if id(v) not in inside]


# keras-hub's task base classes and the Hugging Face kind of head each one is.
TASK_KINDS = (
    ("CausalLM", Head.CAUSAL_LM),
    ("MaskedLM", Head.MASKED_LM),
    ("TextClassifier", Head.SEQUENCE_CLASSIFICATION),
)


def stored_task_head(task: Any, what: str, head: Head | None) -> Head | None:
    """The kind of head a keras-hub task held is, from its class (``Llama3CausalLM``: a
    causal LM), or None for another task; exit 2 where ``head`` (``--head``) names
    another kind than the task is (BASE, its backbone, is always asked for)."""
    keras_hub = import_keras_hub()
    kind = next(
        (k for name, k in TASK_KINDS if isinstance(task, getattr(keras_hub.models, name, ()))),
        None,
    )
    if head is not None and head is not Head.BASE and kind is not None and head is not kind:
        raise TfparityError(
            f"{what} a keras-hub {type(task).__name__}, a {kind.value} task, but --head "
            f"{head.value} asks for a {head.value} model: the head checked is the file's "
            f"own. Drop --head (or give --head {kind.value}), or --head base to check its "
            "backbone only."
        )
    return kind


def ported_causal_lm(task: Any, head: Head | None) -> bool:
    """Whether the keras-hub task held is checked whole, as a causal LM with its logits:
    a ``CausalLM`` whose head is its backbone's token embedding (or the
    ``reverse_embeddings`` keras-hub's converters port ``lm_head.weight`` into), so every
    weight it computes with is the converter's; not with ``--head base``."""
    keras_hub = import_keras_hub()
    return (
        head is not Head.BASE
        and isinstance(task, keras_hub.models.CausalLM)
        and not head_variables(task)
    )


def task_backbone(task: Any, what: str, head: Head | None) -> tuple[Any, str]:
    """The backbone of a keras-hub task held (a ``.keras`` file's, or the user's object)
    and the note saying what of it is checked; ``what`` begins the sentences ("m.keras
    holds", "The model held in memory is"). A task with a head of its own is refused
    (exit 2) unless ``head`` is BASE: keras-hub's converters never port such a head, so a
    check that passed it would claim a head nobody checked."""
    cls, body = type(task).__name__, type(task.backbone).__name__
    own = head_variables(task)
    if own and head is not Head.BASE:
        raise TfparityError(
            f"{what} a keras-hub task ({cls}) whose head ({', '.join(own)}) is not "
            "ported from the checkpoint: keras-hub's converters port a checkpoint's backbone "
            f"only, and {cls}.from_preset makes the head up at random. tfparity has no map "
            f"of {cls}'s head onto transformers', so it will not pass one: --head base "
            f"(head='base' in Python) checks its backbone ({body}) against the checkpoint's "
            "base model, the head left out and the report saying so."
        )
    if own:
        return task.backbone, (
            f"{what} a keras-hub task ({cls}): as --head base asks, its backbone "
            f"({body}) is checked against the checkpoint's base model; the task's head "
            f"({', '.join(own)}) is not checked."
        )
    return task.backbone, (
        f"{what} a keras-hub task ({cls}): its backbone ({body}) is checked; the "
        "task's head is not."
    )


@dataclass
class KerasHubTask(KerasHubModel):
    """A keras-hub task around a converted backbone: the backbone's side, with the
    task's ``logits`` (its own head's) beside every hidden state."""

    task: Any = None

    @property
    def model(self) -> Any:
        return self.task

    def task_feed(self, feed: dict[str, Any]) -> dict[str, Any]:
        """The task's inputs for the backbone's ``feed`` (a task that takes more, as a
        masked LM's ``mask_positions``, adds them)."""
        return feed

    def forward(self, feed: dict[str, Any], inputs_embeds: Any = None) -> dict[str, Any]:
        """The task's call: its ``logits``, and the ``sequence_output`` its backbone
        hands the head (recorded as the task runs it)."""
        if inputs_embeds is not None:
            feed = {**feed, "token_ids": np.zeros_like(feed["token_ids"])}  # read by nothing
        with task_run(self.backbone, inputs_embeds) as seen:
            logits = self.task(self.task_feed(feed), training=False)
        return {"sequence_output": seen["sequence_output"], "logits": logits}

    def trace_of(self, out: dict[str, Any], hidden: list[np.ndarray]) -> Trace:
        """Hugging Face's head outputs: the hidden states and ``logits``."""
        base = super().trace_of(out, hidden)
        arrays = {k: base[k] for k in base if k.startswith("hidden_states[")}
        arrays["logits"] = to_numpy(out["logits"])
        return Trace(arrays)

    def output_names(self, reference: Any) -> set[str]:
        return {k for k in reference if k.startswith("hidden_states[")} | {"logits"}


@dataclass
class KerasHubCausalLM(KerasHubTask):
    """A keras-hub ``CausalLM`` task around a converted backbone: the backbone's side,
    with the task's ``logits`` and its generation."""

    @property
    def head(self) -> Head:
        return Head.CAUSAL_LM

    @property
    def headless_reason(self) -> None:
        return None  # the task's logits: top-1 token agreement is measured

    def how_embeds_run(self) -> str:
        return (
            f"keras-hub task {type(self.task).__name__}: the input_ids path calls the task "
            "(logits from its own head, the token embedding reversed); the inputs_embeds "
            "path runs the same task with the token lookup's output replaced by the "
            "embeddings gathered from the token embedding matrix; hidden_states[0] is the "
            "first block's input, the last one the backbone's sequence_output."
        )

    def reloaded(self) -> KerasHubCausalLM | None:
        """The backbone after ``save_to_preset`` and ``from_preset`` (the LM head's
        weights live in it), in a fresh task."""
        base = super().reloaded()
        return None if base is None else causal_lm_side(base)

    def in_process_generator(self) -> Any:
        """Greedy generation through the task's own ``generate``
        (:class:`~.generation.KerasHubGenerator`)."""
        from .generation import KerasHubGenerator

        return KerasHubGenerator(self)


@contextlib.contextmanager
def task_run(backbone: Any, inputs_embeds: Any) -> Iterator[dict[str, Any]]:
    """While the task runs: the backbone's output recorded (``sequence_output``), and,
    with ``inputs_embeds``, the token lookup (the token embedding called forward)
    answering with them; the head's reversed call of the same layer is its own."""
    seen: dict[str, Any] = {}
    restore = [(backbone, "call", backbone.call)]
    own_backbone = backbone.call

    def backbone_call(*args: Any, **kwargs: Any) -> Any:
        out = own_backbone(*args, **kwargs)
        seen["sequence_output"] = out["sequence_output"] if isinstance(out, dict) else out
        return out

    backbone.call = backbone_call
    if inputs_embeds is not None:
        lookup = backbone.token_embedding
        # Keras calls a quantised layer's quantized_call (its dequantising lookup), not call
        method = "call" if getattr(lookup, "quantization_mode", None) is None else "quantized_call"
        own_lookup = getattr(lookup, method)
        restore.append((lookup, method, own_lookup))
        tf = import_tf()
        fed = tf.cast(tf.convert_to_tensor(inputs_embeds), lookup.compute_dtype)

        def lookup_call(inputs: Any, *args: Any, reverse: bool = False, **kwargs: Any) -> Any:
            return own_lookup(inputs, *args, reverse=True, **kwargs) if reverse else fed

        setattr(lookup, method, lookup_call)
    try:
        yield seen
    finally:
        for layer, name, call in reversed(restore):
            setattr(layer, name, call)
