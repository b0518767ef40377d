"""What a TF checkpoint (``tf_model.h5``, TF-format safetensors, sharded or not) holds
against what the model built from it needs, by PyTorch names.

transformers' TF loader says what it did not fill only by layer for ``.h5`` (a missing
head is ``classifier``, a weightless dropout an unused ``dropout_14``), so the names are
read from the files themselves and both sides mapped to PyTorch names with
transformers' own rule: the same :class:`~.holdings.Holdings` a PyTorch checkpoint
gives, and the same verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import TfparityError
from .holdings import made_up_note

H5, H5_INDEX = "tf_model.h5", "tf_model.h5.index.json"
ST, ST_INDEX = "model.safetensors", "model.safetensors.index.json"


def tf_checkpoint_gaps(
    model: Any, directory: Path, files: set[str], safetensors: bool
) -> dict[str, list[str]]:
    """``missing`` (the model's weights the checkpoint lacks) and ``unused`` (the
    checkpoint's weights the model never reads), by PyTorch names with the base prefix,
    as :func:`~..hf_tf.loading._from_pt_state` records them for a PyTorch checkpoint."""
    stored = {pt_name(n) for n in stored_tf_names(directory, files, safetensors)}
    needed = {pt_name(v.name) for v in model.weights}
    missing = sorted(needed - stored)
    return {"notes": made_up_note(missing), "missing": missing, "unused": sorted(stored - needed)}


def pt_name(tf_name: str) -> str:
    """The PyTorch state-dict name of a TF variable name, its model scope first
    (``tf_bert_model/bert/...``; the converter drops that first level). The name does
    not depend on the shape, which only decides the transposition (not asked here)."""
    from transformers.modeling_tf_pytorch_utils import convert_tf_weight_name_to_pt_weight_name

    return convert_tf_weight_name_to_pt_weight_name(tf_name, tf_weight_shape=())[0]


def stored_tf_names(directory: Path, files: set[str], safetensors: bool) -> list[str]:
    """The weight names a TF checkpoint holds, each with a model scope first: a sharded
    checkpoint's index names them so; a single ``.h5`` lists them per layer; TF
    safetensors keep them without the model's scope (one is put back). ``safetensors``:
    the checkpoint read is the TF safetensors (transformers prefers them to ``.h5``)."""
    single, index = (ST, ST_INDEX) if safetensors else (H5, H5_INDEX)
    if single not in files:
        return list(json.loads((directory / index).read_text())["weight_map"])
    if safetensors:
        return [f"model/{k}" for k in _safetensors_keys(directory / ST)]
    return _h5_names(directory / H5)


def _h5_names(path: Path) -> list[str]:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            return [
                _text(w)
                for layer in f.attrs["layer_names"]
                for w in f[_text(layer)].attrs["weight_names"]
            ]
    except (OSError, KeyError) as exc:
        raise TfparityError(f"The TF checkpoint {path} could not be read: {exc}") from exc


def _text(name: Any) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)


def _safetensors_keys(path: Path) -> list[str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as f:
        return list(f.keys())
