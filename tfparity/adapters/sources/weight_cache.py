"""Converted weights cached on disk, keyed by the checkpoint's hash.

Loading a PyTorch safetensors checkpoint into a TF model maps every name, transposes
kernels and assigns variable by variable; each sweep process (and each shard) would
pay that again. The built TF weights are saved once as an ``.npz`` under
``$TFPARITY_CACHE_DIR`` (default ``~/.cache/tfparity``) in a folder named by the
sha256 of the safetensors file(s), per TF class and transformers version, and loaded
from there next time. A changed checkpoint has another hash, so the cache cannot go
stale; a cache file that cannot be read is ignored and rewritten. Set
``TFPARITY_CACHE_DIR=off`` to disable it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ENV = "TFPARITY_CACHE_DIR"
_OFF = ("", "0", "off", "none")


def cache_root() -> Path | None:
    """The cache folder, or None when disabled."""
    value = os.environ.get(ENV)
    if value is None:
        return Path.home() / ".cache" / "tfparity"
    return None if value.strip().lower() in _OFF else Path(value).expanduser()


def checkpoint_hash(files: Sequence[Path]) -> str:
    """sha256 over the checkpoint file(s), in the order given (shards sorted)."""
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    """Where one conversion lives: ``<root>/<sha256>/<Class>-tf<transformers>.npz``."""

    path: Path

    @classmethod
    def for_checkpoint(cls, root: Path, files: Sequence[Path], model_class: str) -> CacheEntry:
        import transformers

        name = f"{model_class}-transformers{transformers.__version__}.npz"
        return cls(root / checkpoint_hash(files) / name)

    @property
    def notes_path(self) -> Path:
        return self.path.with_suffix(".json")


def weight_key(variable: Any) -> str:
    """A variable's name without the model's own scope (``tf_bert_model_3/``), which
    Keras numbers per process."""
    return variable.name.split("/", 1)[-1]


def load_or_convert(
    files: Sequence[Path],
    model_class: str,
    empty: Callable[[], Any],
    convert: Callable[[], tuple[Any, dict]],
) -> tuple[Any, dict, str]:
    """``(model, facts, how)``: from the cache when it holds this checkpoint, else by
    ``convert()`` (then saved). ``facts`` is what the conversion found (a JSON object:
    notes, the weights it lacked); ``how`` says which, for the model's source line."""
    root = cache_root()
    if root is None:
        model, facts = convert()
        return model, facts, "converted (weight cache off)"
    entry = CacheEntry.for_checkpoint(root, files, model_class)
    if entry.path.exists():
        model = empty()
        if _assign(model, entry.path):
            facts = _read_facts(entry)
            if facts is not None:
                return model, facts, f"converted weights from cache {entry.path}"
    model, facts = convert()
    _save(model, facts, entry)
    return model, facts, f"converted, cached in {entry.path}"


def _assign(model: Any, path: Path) -> bool:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception:  # corrupt or partial: convert again
        return False
    variables = model.weights
    if {weight_key(v) for v in variables} != set(arrays):
        return False
    for v in variables:
        value = arrays[weight_key(v)]
        if tuple(value.shape) != tuple(v.shape):
            return False
        v.assign(value)
    return True


def _save(model: Any, facts: dict, entry: CacheEntry) -> None:
    """Write atomically (temp file + rename), so a concurrent reader sees all or nothing;
    a read-only or full disk only costs the cache."""
    try:
        entry.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.path.with_name(f".{entry.path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.savez(f, **{weight_key(v): v.numpy() for v in model.weights})
        os.replace(tmp, entry.path)
        entry.notes_path.write_text(json.dumps(facts))
    except OSError:
        return


def _read_facts(entry: CacheEntry) -> dict | None:
    """The conversion's facts; None for an entry written before they were kept (a list
    of notes) or unreadable: converted again rather than judged without them."""
    try:
        facts = json.loads(entry.notes_path.read_text())
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) else None
