"""Where a ``keras-hub:`` spec's weights and facts come from: the Hugging Face checkpoint
keras-hub converts (its config.json and tokenizer), or a keras-hub preset directory and
the Hugging Face config fields its saved structure states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import TfparityError
from ..hf_tf.tiny_checkpoints import spec_dir
from ..sources.specs import ModelSpec


def checkpoint_of(spec: ModelSpec) -> tuple[Path, bool]:
    """The directory keras-hub converts for a parsed ``keras-hub:`` spec, and whether it
    is a keras-hub preset (``save_to_preset``) rather than a Hugging Face checkpoint."""
    if spec.inner is None:
        return Path(spec.location), True
    return spec_dir(spec.inner), False


def preset_backbone(directory: Path) -> dict[str, Any]:
    """The backbone record (``class_name``, ``config``) of a preset's config.json, whose
    class must be one tfparity maps onto transformers (else exit 2, naming both)."""
    from ...architectures import keras_hub_backbones

    try:
        saved = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise TfparityError(
            f"{directory} has no readable keras-hub config.json ({exc}); is it a preset "
            "written by save_to_preset?"
        ) from exc
    name = saved.get("class_name") if isinstance(saved, dict) else None
    if name not in keras_hub_backbones():
        raise TfparityError(
            f"The keras-hub preset {directory} holds a {name or 'unnamed'} backbone, which "
            f"tfparity cannot map onto a transformers model; supported backbones: "
            f"{', '.join(sorted(keras_hub_backbones()))}."
        )
    return saved


def preset_causal_lm(keras_hub: Any, directory: Path) -> Any:
    """keras-hub's ``CausalLM`` subclass a preset was saved from (its ``task.json``,
    which a task's ``save_to_preset`` writes beside the backbone's ``config.json``), or
    None: a backbone's preset, or another task's."""
    try:
        saved = json.loads((directory / "task.json").read_text())
    except (OSError, ValueError):
        return None
    name = saved.get("class_name") if isinstance(saved, dict) else None
    cls = getattr(keras_hub.models, name, None) if isinstance(name, str) else None
    return cls if isinstance(cls, type) and issubclass(cls, keras_hub.models.CausalLM) else None


def preset_loaded(task: Any) -> str:
    """The note of a causal LM's preset, loaded whole (keras-hub 0.32's
    ``Backbone.from_preset`` finds none of a quantised task's variables)."""
    name = task.__name__
    return (
        f"The preset was saved from a keras-hub task ({name}): it is loaded whole "
        f"({name}.from_preset; keras-hub's Backbone.from_preset cannot read a quantised "
        "task's preset) and checked as that causal LM."
    )


def preset_fields(saved: dict[str, Any], backbone: Any) -> dict[str, Any]:
    """The Hugging Face config fields a preset states: its saved structure mapped by the
    family's layout (:attr:`KerasHubLayout.preset_config`), plus the fields the loaded
    backbone really uses (:attr:`KerasHubLayout.effective_config`)."""
    from ...architectures import keras_hub_backbones

    layout = keras_hub_backbones()[saved["class_name"]].keras_hub
    structure = layout.preset_config(saved.get("config") or {})
    return {**structure, **layout.effective_config(backbone)}


def preset_config(saved: dict[str, Any], stated: dict[str, Any]) -> Any:
    """The transformers config of the preset's family holding what it states (the rest,
    such as token ids, at transformers' defaults until a reference supplies them)."""
    from ...architectures import keras_hub_backbones
    from ..runtime.imports import import_transformers

    model_type = keras_hub_backbones()[saved["class_name"]].model_type
    return import_transformers().AutoConfig.for_model(model_type, **stated)
