"""Which TF side a parsed MODEL spec or a Python object becomes.

A spec: the loader of its kind, from the one table :data:`SPEC_LOADERS` (a Hugging Face
TF model for a directory, hub id, minilm or tiny spec; the keras-hub side for
``keras-hub:<SPEC>``; an export's side for a SavedModel, ``.keras`` or ``.tflite``).

An object the user holds: a Hugging Face TF model (its
own :class:`~.hf_tf.tf_model.TFModel`), a keras-hub backbone (the keras-hub side, its weights
traced through keras-hub's converter run on the reference's checkpoint), a keras-hub
``CausalLM`` (whole, with its logits), a keras-hub task with a head of its own (refused
unless ``head`` is BASE, then its backbone), or anything else runnable, a model of the
user's own (:class:`~.user.side.UserModel`).

A keras-hub backbone or a model of the user's own carries no Hugging Face config or
tokenizer: those come from the reference ``pt``, which they therefore need.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..architectures.heads import Head
from ..errors import TfparityError
from .interfaces.sides import TFSide
from .runtime.imports import import_transformers
from .sources.specs import ModelSpec

HELD_NOTE = "A keras-hub backbone held in memory"


# ----------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class LoadRequest:
    """What a spec's loader is asked beside the spec: one record, so every loader of
    :data:`SPEC_LOADERS` has one signature and takes what it needs of it."""

    allow_pickle: bool = False
    head: Head | None = None  # the model class's kind (None: the spec's, else its config's)
    companion: str | ModelSpec | None = None  # an export's config and tokenizer
    signature: str | None = None  # the signature an export runs
    decoders: bool = False  # a seq2seq LM loads (heads.unsupported): generate, crosscheck
    # The Keras backend a keras-hub side runs on (None or tensorflow: in this process;
    # jax, torch: in a process of its own, keras_hub.remote)
    backend: str | None = None


def _hf_tf_side(spec: ModelSpec, request: LoadRequest) -> TFSide:
    from .hf_tf.tf_model import TFModel

    return TFModel.load(
        spec, allow_pickle=request.allow_pickle, head=request.head, decoders=request.decoders
    )


def _keras_hub_side(spec: ModelSpec, request: LoadRequest) -> TFSide:
    from .keras_hub.task import load_keras_hub_side

    if request.backend not in (None, "tensorflow"):
        from .keras_hub.remote import check_backend, remote_keras_hub

        check_backend(request.backend)  # exit 2 before the conversion
        return remote_keras_hub(load_keras_hub_side(spec, request.head), request.backend)
    return load_keras_hub_side(spec, request.head)


def _export_side(spec: ModelSpec, request: LoadRequest) -> TFSide:
    from .exported import load_export

    return load_export(spec, request.companion, request.signature, request.head)


# The one dispatch on a parsed spec's kind (every ``Kind`` of specs.py has a row; a test
# holds that): a new kind of spec is one loader here, not a branch in each caller.
SPEC_LOADERS: dict[str, Callable[[ModelSpec, LoadRequest], TFSide]] = {
    "dir": _hf_tf_side,
    "hub": _hf_tf_side,
    "minilm": _hf_tf_side,
    "tiny": _hf_tf_side,
    "keras-hub": _keras_hub_side,
    "saved-model": _export_side,
    "keras-file": _export_side,
    "litert": _export_side,
    "onnx": _export_side,
}


def spec_side(spec: ModelSpec, request: LoadRequest) -> TFSide:
    """The TF side a parsed MODEL spec names, by its kind's loader; a Keras backend
    other than TensorFlow is for a keras-hub spec only (exit 2 otherwise)."""
    if request.backend not in (None, "tensorflow") and spec.kind != "keras-hub":
        raise backend_refusal(request.backend, spec.text)
    return SPEC_LOADERS[spec.kind](spec, request)


def backend_refusal(backend: str, what: str) -> TfparityError:
    """Why ``--backend`` does not apply to ``what`` (exit 2)."""
    return TfparityError(
        f"--backend {backend} runs a keras-hub model (keras-hub:<SPEC>) on that Keras "
        f"backend; {what} is not one (a Hugging Face TF model runs on tf-keras, an "
        "export or a model of your own as it is). Use keras-hub:<SPEC>, or drop --backend."
    )


# ----------------------------------------------------------------------------- objects


def object_side(
    obj: Any,
    *,
    pt: Any = None,
    layers: dict[Any, int] | None = None,
    weights: dict[str, Any] | None = None,
    tokenizer: Any = None,
    head: Head | None = None,
) -> TFSide:
    """The TF side for ``obj`` (see the module's docstring); ``layers``/``weights`` are
    for a model of the user's own (elsewhere tfparity knows both: exit 2)."""
    from .user.side import user_model

    if is_hf_tf_model(obj):
        _refuse_maps(layers, weights, "a Hugging Face TF model, whose layers and weights")
        from .hf_tf.tf_model import TFModel

        return TFModel.wrap(obj, tokenizer=tokenizer)
    if is_keras_hub_backbone(obj):
        _refuse_maps(layers, weights, "a keras-hub backbone, whose layers and weights")
        return held_backbone(obj, pt)
    if is_keras_hub_task(obj) and (head is Head.BASE or _has_own_head(obj) or _is_lm(obj)):
        _refuse_maps(layers, weights, "a keras-hub task, whose layers and weights")
        return held_task(obj, pt, head)
    side = user_model(obj, layers=layers, weights=weights, tokenizer=tokenizer, head=head)
    return side.bound(pt)


def is_hf_tf_model(obj: Any) -> bool:
    """A transformers TF model (tf-keras): only asked once tf-keras is imported, as it
    is wherever such a model exists."""
    tf_keras = sys.modules.get("tf_keras")
    if tf_keras is None or not isinstance(obj, tf_keras.Model):
        return False
    return isinstance(obj, import_transformers().TFPreTrainedModel)


def is_keras_hub_backbone(obj: Any) -> bool:
    keras_hub = sys.modules.get("keras_hub")
    return keras_hub is not None and isinstance(obj, keras_hub.models.Backbone)


def is_keras_hub_task(obj: Any) -> bool:
    keras_hub = sys.modules.get("keras_hub")
    return keras_hub is not None and isinstance(obj, keras_hub.models.Task)


def _has_own_head(task: Any) -> bool:
    from .keras_hub.task import head_variables

    return bool(head_variables(task))


def _is_lm(task: Any) -> bool:
    from .keras_hub.task import ported_causal_lm

    return ported_causal_lm(task, None)


def _refuse_maps(layers: Any, weights: Any, what: str) -> None:
    if layers is not None or weights is not None:
        raise TfparityError(
            f"layers= and weights= are for a model of your own; this is {what} tfparity "
            "already knows. Leave them out."
        )


def held_backbone(backbone: Any, pt: Any) -> TFSide:
    """A keras-hub backbone the user holds, as the keras-hub side: its Hugging Face
    config from its own structure and the reference's checkpoint, the tokenizer and
    the weight mapping from keras-hub's converter run on that checkpoint (as for a
    keras-hub preset, :meth:`KerasHubModel.with_reference`)."""
    from .keras_hub.side import PRESET_NOTE, backbone_side, import_keras_hub

    if not isinstance(pt, str):
        raise TfparityError(
            f"{type(backbone).__name__} is a keras-hub backbone held in memory: it takes its "
            "tokenizer and weight mapping from the checkpoint of its PyTorch reference. "
            "Pass pt=<MODEL spec> (the Hugging Face checkpoint it holds)."
        )
    import_keras_hub()  # the TensorFlow backend, or exit 2
    name = type(backbone).__name__
    side = backbone_side(
        backbone,
        name=f"{name} (in memory)",
        source=f"keras-hub {name} held in memory",
        notes=[PRESET_NOTE],
    )
    bound = side.with_reference(pt)
    bound.notes = [n.replace("A keras-hub preset directory", HELD_NOTE) for n in bound.notes]
    return bound


def held_task(task: Any, pt: Any, head: Head | None) -> TFSide:
    """A keras-hub task the user holds: a ``CausalLM`` whole, with its logits (as a
    ``.keras`` file's); one whose head is its own (a ``TextClassifier``'s, never ported
    by keras-hub's converters) refused (exit 2) unless ``head`` is BASE; then its
    backbone, as :func:`held_backbone`, with a note that the head is not checked.
    ``head`` naming another kind than the task is exit 2."""
    from .keras_hub.heads import head_task_side, mapped_head
    from .keras_hub.task import causal_lm_side, ported_causal_lm, stored_task_head, task_backbone

    what = "The model held in memory is"
    stored_task_head(task, what, head)
    if ported_causal_lm(task, head):
        return causal_lm_side(held_backbone(task.backbone, pt), type(task))
    mapped = mapped_head(task, head)
    if mapped is not None:  # a head of its own, mapped onto the checkpoint's
        return head_task_side(held_backbone(task.backbone, pt), task, mapped)
    backbone, note = task_backbone(task, what, head)
    side = held_backbone(backbone, pt)
    side.notes.append(note)
    return side
