"""The inputs every backend runs: read from the user's npz, or made from the ``.keras``
file's own config (its ``config.json``, read from the zip without Keras), so the parent
process writes them once and no backend is imported to learn the model's inputs. The
other facts the parent reads off that config without Keras live here too: its
vocabulary and whether it is a keras-hub model (the mode Keras quantised it to has its
one reader, :func:`tfparity.adapters.tf_common.quantize.quantised_mode`)."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import TfparityError


@dataclass(frozen=True)
class InputSpec:
    """One model input as the file's config declares it (``None``: any size)."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str


def read_config(path: Path) -> dict[str, Any]:
    """The model config a ``.keras`` file holds; a TfparityError for anything else."""
    try:
        with zipfile.ZipFile(path) as held:
            return json.loads(held.read("config.json"))
    except (OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as e:
        raise TfparityError(
            f"{path} is not a Keras 3 .keras file ({type(e).__name__}: {e}); save the model "
            "with model.save('NAME.keras')."
        ) from None


def input_specs(config: dict[str, Any]) -> list[InputSpec]:
    """The model's inputs, from its InputLayers (first to last, as the file lists them)."""
    specs = []
    for layer in _layers(config):
        if layer.get("class_name") == "InputLayer":
            c = layer["config"]
            shape = c.get("batch_shape") or [None, *(c.get("batch_input_shape") or [None])[1:]]
            specs.append(
                InputSpec(c.get("name", "input"), tuple(shape), str(c.get("dtype", "float32")))
            )
    return specs


def keras_hub_model(config: dict[str, Any]) -> bool:
    """Whether a ``.keras`` file holds a keras-hub model (a backbone or a task): its
    top-level class is registered by keras-hub, or (a subclass of one, registered by
    its user) it declares no Input and holds a backbone's arguments (``vocabulary_size``,
    its own or its ``backbone``'s). Its config holds the class's arguments, not a graph
    of Input layers, so its inputs are learnt by loading it (:func:`tokenised`)."""
    if str(config.get("registered_name") or "").startswith("keras_hub>"):
        return True
    inner = config.get("config") or {}
    backbone = (inner.get("backbone") or {}).get("config") or {}
    return not input_specs(config) and ("vocabulary_size" in inner or "vocabulary_size" in backbone)


# The inputs of keras-hub's text backbones and tasks, and how a batch fills each.
TOKENISED = ("token_ids", "padding_mask", "segment_ids")


def tokenised(batch: Any, names: list[str]) -> list[np.ndarray]:
    """A keras-hub model's inputs ``names`` (in its input order) from a tokenised
    ``batch`` (:class:`tfparity.inputs.Batch`), as a keras-hub spec feeds its backbone:
    ``token_ids``, ``padding_mask`` and, where the model declares it, ``segment_ids``
    (the batch's token types, else zeros); an input of another name is a TfparityError
    naming it."""
    ids = np.asarray(batch.input_ids, np.int32)
    types = batch.token_type_ids
    feed = {
        "token_ids": ids,
        "padding_mask": np.asarray(batch.attention_mask, np.int32),
        "segment_ids": np.zeros_like(ids) if types is None else np.asarray(types, np.int32),
    }
    unknown = [n for n in names if n not in feed]
    if unknown:
        raise TfparityError(
            f"the keras-hub model takes {', '.join(unknown)}, which tfparity cannot make "
            f"from token ids (it makes {', '.join(TOKENISED)}): give --inputs FILE.npz, one "
            "array per model input."
        )
    return [feed[n] for n in names]


def vocabulary(config: dict[str, Any]) -> int | None:
    """The smallest ``input_dim`` of the model's Embedding layers, or ``vocabulary_size``
    of a keras-hub backbone (which builds its token embedding itself, so the file's
    config holds no Embedding): token ids below it are valid for every one of them, and
    an output that wide is logits (None: the model embeds nothing)."""
    sizes = [
        c["config"][key]
        for c in _layers(config)
        for key in ("input_dim", "vocabulary_size")
        if isinstance(c.get("config", {}).get(key), int)
    ]
    return min(sizes, default=None)


def _layers(config: Any) -> list[dict[str, Any]]:
    """Every layer config, nested models' included, depth first."""
    found: list[dict[str, Any]] = []
    if isinstance(config, dict):
        if "class_name" in config and isinstance(config.get("config"), dict):
            found.append(config)
        for value in config.values():
            found.extend(_layers(value))
    elif isinstance(config, list):
        for value in config:
            found.extend(_layers(value))
    return found


def random_inputs(
    config: dict[str, Any], count: int, seq_len: int, seed: int = 0
) -> list[np.ndarray]:
    """Seeded inputs for every input of the model: ``count`` rows of ``seq_len`` (the
    first free dimension is the batch, the others the sequence length); integer inputs
    get token ids below the model's vocabulary, float inputs standard normal values."""
    rng = np.random.default_rng(seed)
    specs = input_specs(config)
    if not specs:
        raise TfparityError("the .keras file declares no Input: give --inputs FILE.npz.")
    arrays = []
    for spec in specs:
        shape = [count] + [seq_len if d is None else int(d) for d in spec.shape[1:]]
        if np.issubdtype(np.dtype(spec.dtype), np.integer):
            vocab = vocabulary(config)
            if vocab is None:
                raise TfparityError(
                    f"input {spec.name} takes integers but the model has no Embedding to "
                    "bound them: give --inputs FILE.npz."
                )
            arrays.append(rng.integers(0, vocab, shape).astype(spec.dtype))
        else:
            arrays.append(rng.standard_normal(shape).astype(spec.dtype))
    return arrays


def file_inputs(path: Path) -> list[np.ndarray]:
    """The arrays of an npz, in the order it holds them (one per model input)."""
    try:
        with np.load(path) as held:
            return [held[k] for k in held.files]
    except (OSError, ValueError) as e:
        raise TfparityError(f"--inputs {path}: not a readable .npz ({e}).") from None
