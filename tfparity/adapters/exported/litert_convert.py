"""Write a LiteRT flatbuffer from a Hugging Face TF model, as a user would ship one.

Tests, the benchmark and the docs need real ``.tflite`` files of known models (clean,
with a fault, quantised); the converter path is the one the docs recommend
(``tf.lite.TFLiteConverter.from_concrete_functions`` on a serving function with a fixed
``[batch, seq]`` signature). The serving function returns the hidden states as outputs
(``hidden_states_<k>``) only when asked: a shipped model usually returns
``last_hidden_state`` alone, and the hidden states are then read from the flatbuffer's
intermediate tensors (:mod:`.litert_graph`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import TfparityError
from ..runtime import import_tf

# Quantisation recipes, named as the report names what it finds in the artefact.
QUANTISATIONS = ("fp32", "dynamic-range int8", "float16")


def to_litert(
    tf_model: Any,
    path: str | Path,
    *,
    quantisation: str = "fp32",
    batch: int = 2,
    seq: int = 16,
    hidden_states: bool = False,
) -> Path:
    """Convert ``tf_model`` (a :class:`~tfparity.adapters.tf_model.TFModel`) to a LiteRT
    flatbuffer at ``path`` with static input shapes ``[batch, seq]``; ``quantisation``:
    one of :data:`QUANTISATIONS` (dynamic-range int8 is ``Optimize.DEFAULT``; float16
    adds ``supported_types=[float16]``)."""
    if quantisation not in QUANTISATIONS:
        raise TfparityError(
            f"Unknown quantisation {quantisation!r}; one of {', '.join(QUANTISATIONS)}."
        )
    tf = import_tf()
    model = tf_model.model
    types = bool(getattr(tf_model.config, "type_vocab_size", 0))
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if types else [])
    signature = [tf.TensorSpec([batch, seq], tf.int32, name=n) for n in names]

    @tf.function(input_signature=signature)
    def serve(*inputs: Any) -> dict[str, Any]:
        kwargs = dict(zip(names[1:], inputs[1:], strict=True))
        out = model(inputs[0], output_hidden_states=True, training=False, **kwargs)
        found = {k: v for k, v in out.items() if k != "hidden_states" and v is not None}
        if hidden_states:
            found.update({f"hidden_states_{k}": h for k, h in enumerate(out.hidden_states)})
        return found

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [serve.get_concrete_function()], model
    )
    if quantisation != "fp32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantisation == "float16":
        converter.target_spec.supported_types = [tf.float16]
    path = Path(path)
    path.write_bytes(converter.convert())
    return path
