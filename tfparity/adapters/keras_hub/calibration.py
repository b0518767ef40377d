"""``--calibration FILE``: the calibration data a Keras GPTQ or AWQ ``.keras`` file was
quantised with, so that the exact check can quantise its float source afresh the same
way (docs/quantised.md, "GPTQ and AWQ: --calibration").

The file is a numpy ``.npz`` holding ``token_ids``: an int array of shape
``(num_samples, sequence_length)``, the token ids given to Keras as
``GPTQConfig(dataset=token_ids, num_samples=..., sequence_length=...)`` (or
``AWQConfig``). Token ids, not text: Keras takes them as they are (no tokenizer, which
a saved ``CausalLM`` may not carry, and which would have to be the one the user
tokenised with), and its rows and columns give the two config fields the ``.keras``
file does not record. The file's dtype policies record the bits and the group size
(``gptq/4/128``); the other settings it does not record may ride in the ``.npz`` as
scalars (``symmetric``, ``activation_order``, ``hessian_damping`` for GPTQ;
``num_grid_points`` for AWQ), Keras's defaults where absent.

Reading is numpy only (the CLI refuses a bad file before any model loads); Keras is
imported only to build a config.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...compare.quantisation import CALIBRATED_MODES
from ...errors import TfparityError
from ..tf_common.quantize import layer_modes

# the settings of each mode that takes calibration data that a .keras file does not record
SETTINGS = {
    "gptq": {"symmetric": bool, "activation_order": bool, "hessian_damping": float},
    "awq": {"num_grid_points": int},
}


@dataclass(frozen=True)
class Calibration:
    """The calibration samples (``token_ids``: num_samples x sequence_length) and the
    settings given beside them."""

    path: str
    token_ids: np.ndarray
    settings: dict[str, Any] = field(default_factory=dict)


def read_calibration(path: str | os.PathLike[str] | None, side: Any) -> Calibration | None:
    """The calibration data in ``path`` (an ``.npz``: see the module) for the side under
    test ``side``; None for None. Exit 2 naming what is wrong: no such file, not an
    ``.npz``, no ``token_ids``, not a 2-D array of non-negative ints, a setting tfparity
    does not know, or a ``side`` with no GPTQ or AWQ layer (the data would quantise
    nothing). Called before the side runs."""
    if path is None:
        return None
    from .side import KerasHubModel

    calibration = read_calibration_file(path)
    modes = set(layer_modes(getattr(side, "model", None)).values())
    if modes & set(CALIBRATED_MODES) and not isinstance(side, KerasHubModel):
        raise TfparityError(
            f"--calibration {calibration.path}: {side.name} is checked as a model of your "
            "own, and the exact check against a fresh quantisation covers keras-hub models "
            "(a .keras file, a preset) only: drop --calibration (docs/quantised.md)."
        )
    if not modes & set(CALIBRATED_MODES):
        held = f"its layers are {'+'.join(sorted(modes))}" if modes else "it is not quantised"
        raise TfparityError(
            f"--calibration {calibration.path} is the calibration data of a GPTQ or AWQ "
            f".keras file, and {side.name} is not one ({held} by Keras's model.quantize, "
            "if at all): drop --calibration (docs/quantised.md)."
        )
    return calibration


def read_calibration_file(path: str | os.PathLike[str]) -> Calibration:
    """The ``.npz`` at ``path``, checked as :func:`read_calibration` does, whatever it
    is for: the CLI's exit 2 before any model loads."""
    where = os.fspath(path)
    if not os.path.isfile(where):
        raise TfparityError(f"--calibration {where}: no such file.")
    try:
        held = np.load(where, allow_pickle=False)
    except (OSError, ValueError) as exc:
        held = exc
    if not isinstance(held, np.lib.npyio.NpzFile):
        what = "one array (.npy)" if isinstance(held, np.ndarray) else f"unreadable ({held})"
        raise TfparityError(
            f"--calibration {where} is not a numpy .npz file: it is {what}; give an .npz "
            "holding token_ids, an int array of shape (num_samples, sequence_length) "
            "(docs/quantised.md)."
        )
    with held:
        arrays = {k: np.asarray(held[k]) for k in held.files}
    ids = arrays.pop("token_ids", None)
    if ids is None:
        found = ", ".join(sorted(arrays)) or "nothing"
        raise TfparityError(
            f"--calibration {where} holds no token_ids (it holds {found}): give the token "
            "ids Keras quantised with, an int array of shape (num_samples, sequence_length)."
        )
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer) or ids.size == 0:
        raise TfparityError(
            f"--calibration {where}: token_ids must be a 2-D int array (num_samples, "
            f"sequence_length), not {ids.dtype} of shape {ids.shape}."
        )
    if int(ids.min()) < 0:
        raise TfparityError(f"--calibration {where}: token_ids has negative ids.")
    known = {name: kind for kinds in SETTINGS.values() for name, kind in kinds.items()}
    unknown = sorted(set(arrays) - set(known))
    if unknown:
        raise TfparityError(
            f"--calibration {where}: unknown setting {unknown[0]!r}; besides token_ids it "
            f"may hold {', '.join(sorted(known))}."
        )
    settings = {name: known[name](a.item()) for name, a in arrays.items()}
    return Calibration(where, ids.astype(np.int32), settings)


def policy_settings(layer: Any) -> tuple[str, int, int] | None:
    """``(mode, weight_bits, group_size)`` of a layer Keras quantised with GPTQ or AWQ,
    read from its dtype policy (``gptq/4/128``); None for another layer."""
    mode = getattr(layer, "quantization_mode", None)
    if mode not in CALIBRATED_MODES:
        return None
    policy = layer.dtype_policy
    return str(mode), int(policy.weight_bits), int(policy.group_size)


def keras_config(mode: str, weight_bits: int, group_size: int, calibration: Calibration) -> Any:
    """Keras's ``GPTQConfig`` or ``AWQConfig`` for ``mode`` with these bits and group
    size, ``calibration``'s samples and its settings for that mode."""
    from keras.quantizers import AWQConfig, GPTQConfig

    kind = {"gptq": GPTQConfig, "awq": AWQConfig}[mode]
    rows, columns = calibration.token_ids.shape
    own = {k: v for k, v in calibration.settings.items() if k in SETTINGS[mode]}
    return kind(
        dataset=calibration.token_ids,
        tokenizer=_as_is,
        weight_bits=weight_bits,
        group_size=group_size,
        num_samples=rows,
        sequence_length=columns,
        **own,
    )


def _as_is(ids: Any) -> Any:
    """The tokenizer Keras's config asks for: the samples are token ids already, which
    Keras takes as they are (it tokenises only strings)."""
    return ids


@functools.cache
def keras_uses_calibration() -> bool:
    """Whether the installed Keras's GPTQ uses its calibration data at all: a toy model
    (a 32-token embedding, one 16x16 Dense) quantised twice from the same weights with
    different data; the same variables both times mean it does not.

    Keras 3.15.1 does not (measured; keras-team/keras#23512): ``model.quantize("gptq")``
    switches each layer to its quantised policy first, so a call goes to
    ``quantized_call`` and never to the ``layer.call`` its calibration hooks patch; the
    Hessian stays zero and GPTQ is round-to-nearest (AWQ's scales stay 1 the same way).
    About a second, once per process."""
    import keras
    from keras.quantizers import GPTQConfig

    rng = np.random.default_rng(0)
    table, kernel = rng.normal(size=(32, 16)), rng.normal(size=(16, 16))
    found = []
    for seed in (1, 2):
        embedding, dense = keras.layers.Embedding(32, 16), keras.layers.Dense(16, use_bias=False)
        model = keras.Sequential([keras.Input((8,), dtype="int32"), embedding, dense])
        embedding.set_weights([table.astype("float32")])
        dense.set_weights([kernel.astype("float32")])
        ids = np.random.default_rng(seed).integers(0, 32, (2, 8))
        structure = {"pre_block_layers": [embedding], "sequential_blocks": [dense]}
        config = GPTQConfig(
            dataset=ids,
            tokenizer=_as_is,
            num_samples=2,
            sequence_length=8,
            group_size=-1,
            quantization_layer_structure=structure,
        )
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.quantize("gptq", config=config)
        found.append([np.asarray(v) for v in dense.weights])
    return any(not np.array_equal(a, b) for a, b in zip(*found, strict=True))
