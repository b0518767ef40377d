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

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import TfparityError
from ..runtime.imports import import_tf

# Quantisation recipes, named as the report names what it finds in the artefact.
QUANTISATIONS = ("fp32", "dynamic-range int8", "float16", "full int8")
# Calibration batches of seeded random ids for full-integer quantisation where no texts
# are given: activation ranges need inputs (a shipped recipe uses a sample of real data).
CALIBRATION_BATCHES = 8


def to_litert(
    tf_model: Any,
    path: str | Path,
    *,
    quantisation: str = "fp32",
    batch: int = 2,
    seq: int = 16,
    hidden_states: bool = False,
    calibration: Sequence[str] | None = None,
    inputs: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
) -> Path:
    """Convert ``tf_model`` (a :class:`~tfparity.adapters.hf_tf.tf_model.TFModel`) to a LiteRT
    flatbuffer at ``path`` with static input shapes ``[batch, seq]``; ``quantisation``:
    one of :data:`QUANTISATIONS` (dynamic-range int8 is ``Optimize.DEFAULT``; float16
    adds ``supported_types=[float16]``; full int8 adds a representative dataset, the
    ``calibration`` texts tokenized to ``[batch, seq]`` or else seeded random ids, so
    activations are quantised too, with float kernels where an operator has no integer
    one, the converter's default). ``inputs``: the signature's inputs after
    ``input_ids`` (default: ``attention_mask``, and ``token_type_ids`` where the model has
    a token-type table); ``outputs``: the Hugging Face outputs it returns (default: all
    but the hidden states). A file converted otherwise holds other weights (a model
    served without token types folds its token-type row into a constant; one without
    ``pooler_output`` has no pooler), so reproducing a file takes its own."""
    if quantisation not in QUANTISATIONS:
        raise TfparityError(
            f"Unknown quantisation {quantisation!r}; one of {', '.join(QUANTISATIONS)}."
        )
    tf = import_tf()
    model = tf_model.model
    types = bool(getattr(tf_model.config, "type_vocab_size", 0))
    default = ["attention_mask"] + (["token_type_ids"] if types else [])
    names = ["input_ids", *(default if inputs is None else inputs)]
    signature = [tf.TensorSpec([batch, seq], tf.int32, name=n) for n in names]

    def kept(name: str, value: Any) -> bool:
        wanted = outputs is None or name in outputs
        return name != "hidden_states" and value is not None and wanted

    @tf.function(input_signature=signature)
    def serve(*tensors: Any) -> dict[str, Any]:
        kwargs = dict(zip(names[1:], tensors[1:], strict=True))
        out = model(tensors[0], output_hidden_states=True, training=False, **kwargs)
        found = {k: v for k, v in out.items() if kept(k, v)}
        if hidden_states:
            found.update({f"hidden_states_{k}": h for k, h in enumerate(out.hidden_states)})
        return found

    # The converter saves its trackable object as a temporary SavedModel: a Keras model
    # takes seconds to trace and save, a module that holds only its variables a fraction
    # of that, and the flatbuffer is the same to the byte (tiny:bert, each quantisation).
    holder = tf.Module()
    holder.weights = list(model.variables)
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [serve.get_concrete_function()], holder
    )
    if quantisation != "fp32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantisation == "float16":
        converter.target_spec.supported_types = [tf.float16]
    if quantisation == "full int8":
        feeds = _calibration(tf_model, calibration, batch, seq)
        converter.representative_dataset = lambda: ([f[n] for n in names] for f in feeds)
    path = Path(path)
    path.write_bytes(converter.convert())
    return path


def _calibration(
    tf_model: Any, texts: Sequence[str] | None, batch: int, seq: int
) -> list[dict[str, np.ndarray]]:
    """The converter's calibration feeds: ``texts`` tokenized (padded and cut to ``seq``),
    ``batch`` rows at a time, or seeded random ids with full attention."""
    if texts:
        enc = tf_model.tokenizer(
            list(texts), padding="max_length", truncation=True, max_length=seq, return_tensors="np"
        )
        n = max(batch, len(texts) - len(texts) % batch)  # whole batches; few texts repeat
        ids, mask = (
            np.resize(enc["input_ids"], (n, seq)),
            np.resize(enc["attention_mask"], (n, seq)),
        )
    else:
        rng = np.random.default_rng(0)
        shape = (batch * CALIBRATION_BATCHES, seq)
        ids = rng.integers(0, int(tf_model.limits.vocab_size), shape)
        mask = np.ones(shape)
    ids, mask = ids.astype(np.int32), mask.astype(np.int32)
    return [
        {"input_ids": i, "attention_mask": m, "token_type_ids": np.zeros_like(i)}
        for i, m in zip(
            np.split(ids, len(ids) // batch), np.split(mask, len(mask) // batch), strict=True
        )
    ]
