"""Golden outputs: a PyTorch reference stored in one ``.npz`` file (numpy only).

CI machines often have TensorFlow but not PyTorch (it is large, and the reference
does not change between commits). ``--save-outputs PATH.npz`` runs PyTorch once and
keeps what the cross-check needs from it; ``--load-outputs PATH.npz`` replays it, so
the TF model is judged by the same float64 referee without torch installed.

Layout (``numpy.savez_compressed``; every entry a plain array, read with
``allow_pickle=False``)::

    meta                            0-d str: JSON, see below
    batch_{i}/input_ids             int32 [batch, seq]
    batch_{i}/attention_mask        int32 [batch, seq]
    batch_{i}/token_type_ids        int32 [batch, seq]      (when the batch has them)
    batch_{i}/position_ids          int32 [batch, seq]      (when the batch has them)
    batch_{i}/fp32/<tensor>         PyTorch fp32 run: hidden_states[k], last_hidden_state, ...
    batch_{i}/fp64/<tensor>         PyTorch float64 run (the referee), same names
    batch_{i}/fp32_taps/<tap>       sub-layer taps of the fp32 run (tapped families):
    batch_{i}/fp64_taps/<tap>       embeddings, layer_{j}.attention|intermediate|output, pooler

``meta`` holds ``format`` ("tfparity-golden"), ``version`` (1), ``tfparity_version``,
``model`` (the MODEL spec saved), ``reference`` (the PyTorch model's name),
``config`` (its config as a dict), ``batches`` (count), ``tapped`` (bool), and per batch
the tensor and tap names in canonical order (``order``: ``[{"trace": [...], "taps":
[...]}, ...]``), since a zip archive's entry order is not a contract.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._version import __version__
from .errors import TfparityError

FORMAT, VERSION = "tfparity-golden", 1
_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


@dataclass
class StoredRun:
    """One batch's reference: the fp32 and fp64 traces and their sub-layer taps."""

    inputs: dict[str, np.ndarray]
    fp32: dict[str, np.ndarray]
    fp64: dict[str, np.ndarray]
    fp32_taps: dict[str, np.ndarray] = field(default_factory=dict)
    fp64_taps: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Golden:
    """A stored reference: what the PyTorch side produced, per batch."""

    model: str
    reference: str
    config: dict[str, Any]
    runs: list[StoredRun]
    tapped: bool = False
    tfparity_version: str = __version__


def save_reference(path: str | Path, golden: Golden) -> None:
    """Write ``golden`` to ``path`` in the layout of this module's docstring."""
    arrays: dict[str, np.ndarray] = {}
    order = []
    for i, run in enumerate(golden.runs):
        for name, value in run.inputs.items():
            arrays[f"batch_{i}/{name}"] = np.asarray(value)
        for part in ("fp32", "fp64", "fp32_taps", "fp64_taps"):
            for name, value in getattr(run, part).items():
                arrays[f"batch_{i}/{part}/{name}"] = np.asarray(value)
        order.append({"trace": list(run.fp32), "taps": list(run.fp32_taps)})
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "tfparity_version": golden.tfparity_version,
        "model": golden.model,
        "reference": golden.reference,
        "config": golden.config,
        "batches": len(golden.runs),
        "tapped": golden.tapped,
        "order": order,
    }
    arrays["meta"] = np.array(json.dumps(meta, default=str))
    try:
        with open(path, "wb") as handle:  # a file object: numpy adds no ".npz" suffix
            np.savez_compressed(handle, **arrays)
    except OSError as exc:
        raise TfparityError(f"Cannot write the outputs file {path}: {exc.strerror}.") from exc


def load_reference(path: str | Path) -> Golden:
    """Read a file :func:`save_reference` wrote; anything else is a clear TfparityError."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except FileNotFoundError as exc:
        raise TfparityError(f"The outputs file {path} does not exist.") from exc
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise TfparityError(
            f"The outputs file {path} is not a readable .npz file ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}); write it again with --save-outputs."
        ) from exc
    meta = _meta(arrays, path)
    try:
        runs = [_run(arrays, i, entry) for i, entry in enumerate(meta["order"])]
    except KeyError as exc:
        raise TfparityError(
            f"The outputs file {path} is incomplete: entry {exc} is missing; write it "
            "again with --save-outputs."
        ) from exc
    return Golden(
        model=meta.get("model", ""),
        reference=meta.get("reference", ""),
        config=meta.get("config", {}),
        runs=runs,
        tapped=bool(meta.get("tapped", False)),
        tfparity_version=meta.get("tfparity_version", ""),
    )


def _meta(arrays: dict[str, np.ndarray], path: str | Path) -> dict[str, Any]:
    try:
        meta = json.loads(str(arrays["meta"]))
    except (KeyError, ValueError) as exc:
        raise TfparityError(
            f"The outputs file {path} is an .npz file but not one tfparity wrote (no "
            "readable 'meta' entry); write it with --save-outputs."
        ) from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise TfparityError(f"The outputs file {path} is not a tfparity golden-outputs file.")
    if meta.get("version") != VERSION:
        raise TfparityError(
            f"The outputs file {path} has format version {meta.get('version')!r}; this "
            f"tfparity reads version {VERSION}. Write it again with --save-outputs."
        )
    if not isinstance(meta.get("order"), list) or len(meta["order"]) != meta.get("batches"):
        raise TfparityError(f"The outputs file {path} has an inconsistent 'meta' entry.")
    return meta


def _run(arrays: dict[str, np.ndarray], i: int, entry: dict[str, list[str]]) -> StoredRun:
    prefix = f"batch_{i}/"
    inputs = {n: arrays[prefix + n] for n in _INPUTS if prefix + n in arrays}
    if "input_ids" not in inputs or "attention_mask" not in inputs:
        raise KeyError(f"{prefix}input_ids/attention_mask")

    def part(name: str, names: list[str]) -> dict[str, np.ndarray]:
        return {n: arrays[f"{prefix}{name}/{n}"] for n in names}

    return StoredRun(
        inputs=inputs,
        fp32=part("fp32", entry["trace"]),
        fp64=part("fp64", entry["trace"]),
        fp32_taps=part("fp32_taps", entry["taps"]),
        fp64_taps=part("fp64_taps", entry["taps"]),
    )


def batch_inputs(batch: Any) -> dict[str, np.ndarray]:
    """The arrays of a :class:`~tfparity.inputs.Batch` that identify it in the file."""
    found = {n: getattr(batch, n, None) for n in _INPUTS}
    return {n: np.asarray(v, np.int32) for n, v in found.items() if v is not None}


def match_batches(golden: Golden, batches: Sequence[Any], path: str | Path = "") -> None:
    """Raise a TfparityError unless ``batches`` are exactly the stored ones, in order."""
    where = f" in {path}" if path else ""
    advice = (
        "Run with the same inputs as when the file was saved (--text/--texts/--random, "
        "--batch-size, --seed, --padding-side), or save it again."
    )
    if len(batches) != len(golden.runs):
        raise TfparityError(
            f"The stored outputs{where} hold {len(golden.runs)} batch(es) but the "
            f"requested inputs make {len(batches)}. {advice}"
        )
    for i, (batch, run) in enumerate(zip(batches, golden.runs, strict=True)):
        mine = batch_inputs(batch)
        for name in sorted(set(mine) | set(run.inputs)):
            a, b = mine.get(name), run.inputs.get(name)
            if a is None or b is None or a.shape != b.shape or not np.array_equal(a, b):
                raise TfparityError(
                    f"Batch {i + 1}'s {name} differs from the stored one{where} "
                    f"(requested shape {None if a is None else a.shape}, stored "
                    f"{None if b is None else b.shape}). {advice}"
                )
