"""A Keras 3 ``.keras`` file as the TF side.

It is loaded with keras-hub imported, so keras-hub's registered classes deserialise.
A keras-hub backbone (or a task's, see :func:`~..keras_hub.task.task_backbone`) becomes a
:class:`~tfparity.adapters.keras_hub.side.KerasHubModel`; a keras-hub ``CausalLM``
(float or quantised) its :class:`~tfparity.adapters.keras_hub.task.KerasHubCausalLM`, as
a ``keras-hub:<SPEC>/causal-lm`` spec is: logits, distribution metrics and generation; a
``MaskedLM`` or ``TextClassifier`` whose family maps its head
(:mod:`~tfparity.adapters.keras_hub.heads`) its
:class:`~tfparity.adapters.keras_hub.heads.KerasHubHeadTask`, logits and all.
Each is checked exactly as a keras-hub model: its Hugging Face config fields read from
the backbone's own structure (as for a preset), the companion's tokenizer and remaining
config, and weight hints from keras-hub's converter run on the companion checkpoint,
rebound by variable path (:meth:`KerasHubModel.with_reference`). Any other Keras model
is a user's own model, which the Python API checks (a ``.keras`` file holds no mapping
from its layers to Hugging Face's), on its outputs.
"""

from __future__ import annotations

import zipfile
from dataclasses import replace
from typing import Any

from ...architectures.heads import Head
from ...errors import TfparityError
from ..interfaces.sides import TFSide
from ..keras_hub.heads import head_task_side, mapped_head
from ..keras_hub.quantised_side import part_modes
from ..keras_hub.side import backbone_side, import_keras_hub
from ..keras_hub.task import causal_lm_side, ported_causal_lm, stored_task_head, task_backbone
from ..sources.checkpoints import Companion
from ..sources.holdings import Holdings
from ..sources.specs import ModelSpec
from ..tf_common.quantize import modes_text, stored_mode


def load_keras_file(spec: ModelSpec, companion: Companion, head: Head | None = None) -> TFSide:
    """The keras-hub backbone a ``.keras`` file holds, bound to ``companion``, or its
    causal LM task whole; any other Keras model as a model of the user's own. ``head``
    naming another kind than the file's task is exit 2 (:func:`stored_task_head`); a task
    with a head of its own (a ``TextClassifier``'s, a ``MaskedLM``'s) is refused unless
    ``head`` is BASE (:func:`task_backbone`)."""
    keras_hub = import_keras_hub()
    held = _load(spec)
    notes: list[str] = []
    task = mapped = None
    if isinstance(held, keras_hub.models.Task):
        what = f"{spec.text} holds"
        stored_task_head(held, what, head)
        mapped = mapped_head(held, head)
        if ported_causal_lm(held, head) or mapped is not None:
            task, held = held, held.backbone
        else:
            held, note = task_backbone(held, what, head)
            notes.append(note)
    if not isinstance(held, keras_hub.models.Backbone):
        return _users_own(held, spec, companion)
    side = backbone_side(
        held,
        name=spec.text,
        source=f"Keras 3 file {spec.location} ({type(held).__name__}); tokenizer and config "
        f"from {companion.text}",
        notes=notes,
        tokenizer=companion.tokenizer,
        spec=spec,
    )
    stored = stored_mode(held)
    if stored is not None:
        side.notes.append(
            f"{spec.text} is quantised by Keras ({stored}: its layers' dtype policies are "
            f"{stored}_from_<float>); it is read as it is and judged by the {stored} budgets "
            "(docs/quantised.md), not by the float64 referee."
        )
        if "+" in stored:  # a mixed-mode file: which layer is in which mode
            side.layer_modes = part_modes(side)
            modes = modes_text(side.layer_modes)
            side.notes.append(
                f"{spec.text} mixes modes ({stored}); by layer: {modes}; judged by the budgets "
                "of its coarsest mode, and each layer's growth by its own mode's limit."
            )
    # the file holds every weight the backbone computes with: nothing is missing
    bound = replace(side.with_reference(companion.text), holdings=Holdings.export())
    if task is None:
        return bound
    if mapped is not None:  # a head of its own, mapped onto the checkpoint's
        whole = head_task_side(bound, task, mapped)
        whole.source = (
            f"Keras 3 file {spec.location} ({type(task).__name__} around its "
            f"{type(held).__name__}, preprocessor=None); tokenizer and config from {companion.text}"
        )
        whole.notes.insert(
            0,
            f"{spec.text} holds a keras-hub task ({type(task).__name__}): checked whole, its "
            f"logits against the checkpoint's {mapped.kind} head (tfparity's map of the head: "
            "keras-hub's converters port none).",
        )
        return whole
    lm = causal_lm_side(bound, type(task))
    lm.source = (
        f"Keras 3 file {spec.location} ({type(task).__name__} around its "
        f"{type(held).__name__}, preprocessor=None); tokenizer and config from {companion.text}"
    )
    lm.notes.insert(
        0,
        f"{spec.text} holds a keras-hub task ({type(task).__name__}): checked whole, its "
        "logits (the head is the backbone's token embedding, reversed) against the "
        "checkpoint's causal LM.",
    )
    return lm


def _users_own(held: Any, spec: ModelSpec, companion: Companion) -> TFSide:
    """Any other Keras model in the file: checked as a model of the user's own, on its
    outputs (a file holds no map from its layers to Hugging Face's; the Python API's
    ``layers=`` gives one)."""
    from ..user.side import user_model

    side = user_model(held, name=spec.text).bound(companion.text)
    side.notes.append(
        f"{spec.text} holds a {type(held).__name__}, not a keras-hub model: its outputs "
        "are compared as a model of your own (for layer localisation, load it and pass "
        "layers= to tfparity.crosscheck; see docs/your-own-model.md)."
    )
    return replace(side, spec=spec, source=f"Keras 3 file {spec.location}")


def _load(spec: ModelSpec) -> Any:
    import keras

    try:
        return keras.saving.load_model(spec.location, compile=False)
    except Exception as exc:
        said = " ".join(str(exc).split())
        custom = "could not be deserialized" in said or "Could not locate class" in said
        why = CUSTOM_LAYERS if custom else _calibrated_save(spec.location, said)
        raise TfparityError(f"Keras could not load {spec.text}: {said[:300]}" + why) from exc


def _calibrated_save(path: str, said: str) -> str:
    """Why a GPTQ or AWQ file does not load, where that is why: Keras 3.15's save drops
    each layer's zero points (keras-team/keras#23321; docs/quantised.md)."""
    if "variables, but received" not in said:
        return ""
    try:
        with zipfile.ZipFile(path) as held:
            config = held.read("config.json").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return ""
    modes = [m for m in ("GPTQ", "AWQ") if f'"{m}DTypePolicy"' in config]
    if not modes:
        return ""
    return (
        f" ({modes[0]} layers saved by Keras 3.15 lack their zero points: its save drops "
        "kernel_zero, so the file does not load back, in Keras or here; fixed upstream in "
        "keras-team/keras#23321. Quantise and save with a Keras that has the fix; "
        "docs/quantised.md)"
    )


CUSTOM_LAYERS = (
    " (a layer of your own in a .keras file loads only once the module registering it "
    "with @keras.saving.register_keras_serializable is imported: in Python, import it and "
    "pass the loaded model, tfparity.crosscheck(tf=keras.saving.load_model(PATH), pt=...); "
    "docs/your-own-model.md)"
)
