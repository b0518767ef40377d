"""The generic family: any HF TF text model whose TF class takes ``inputs_embeds`` and
returns hidden states, registered or not.

It knows only what transformers' auto mappings say (the TF and PyTorch classes), so
the cross-check localises to the layer and weight hints look at every parameter whose
name holds the layer number. Positions are read off the model at run time (a position
table or none).
"""

from __future__ import annotations

from ..errors import TfparityError
from .base import Architecture, EmbeddingTables, Positions


class UnknownArchitecture(TfparityError):
    """transformers has no TF class for this model type."""


def architecture(model_type: str) -> Architecture:
    from transformers.models.auto import modeling_auto
    from transformers.models.auto import modeling_tf_auto as tf_auto

    tf_class = _first(tf_auto.TF_MODEL_MAPPING_NAMES.get(model_type))
    pt_class = _first(modeling_auto.MODEL_MAPPING_NAMES.get(model_type))
    if tf_class is None or pt_class is None:
        raise UnknownArchitecture(
            f"transformers has no TensorFlow model for '{model_type}', so tfparity "
            "cannot load it in TensorFlow."
        )
    return Architecture(
        model_type=model_type,
        family="generic",
        tf_class=tf_class,
        pt_class=pt_class,
        pt_head_class=None,
        tf_head_class=_first(
            tf_auto.TF_MODEL_FOR_MASKED_LM_MAPPING_NAMES.get(model_type)
            or tf_auto.TF_MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
        ),
        positions=Positions.UNKNOWN,
        embeddings=EmbeddingTables(),
        generic=True,
    )


def _first(names: str | tuple[str, ...] | None) -> str | None:
    return names[0] if isinstance(names, tuple) else names
