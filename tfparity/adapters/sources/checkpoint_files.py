"""A checkpoint directory's files as tfparity reads them: the local hub snapshot, the
validated ``config.json``, the tokenizer. Specs are resolved to directories by
:mod:`.checkpoints`, which also seeds tiny models (and so sits above the loaders).

Remote code is never run: a config or tokenizer that asks for it (``auto_map``) is
refused by name, and transformers is always called with ``trust_remote_code=False``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import TfparityError
from ..runtime.imports import import_transformers
from .specs import ModelSpec


def local_dir(spec: ModelSpec) -> Path:
    """The directory of a spec that names files already on disk (a directory, minilm, a
    cached hub id); a tiny model's is written by :func:`~..hf_tf.tiny_checkpoints.spec_dir`."""
    return hub_snapshot(spec.location) if spec.kind == "hub" else Path(spec.location)


def hub_snapshot(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception as exc:
        raise TfparityError(
            f"'{repo_id}' is not in the local Hugging Face cache, and tfparity does not "
            "download models (the network may be absent). Download it where you have a "
            "network, or pass a local directory, 'minilm' or 'tiny:<model_type>'."
        ) from exc


def read_config(directory: Path) -> Any:
    """``directory/config.json`` as transformers reads it, after tfparity's own checks:
    a clear refusal naming the file and field, where transformers would guess or fail
    later; what transformers accepts (DeBERTa's ``type_vocab_size`` 0) passes."""
    t = import_transformers()
    try:
        raw = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        _check_config(raw, directory / "config.json", t)
        if raw.get("auto_map"):
            raise TfparityError(
                f"{directory}/config.json asks for custom model code "
                "(auto_map); tfparity never runs remote code."
            )
        return t.AutoConfig.from_pretrained(str(directory), trust_remote_code=False)
    except TfparityError:
        raise
    except Exception as exc:
        raise TfparityError(f"Could not read {directory}/config.json: {exc}") from exc


# Config fields that must be whole numbers >= 1 when present (sizes of tensors), and
# those that may be 0: a table some checkpoints do without (every real DeBERTa and
# DeBERTa-v2/v3 config says "type_vocab_size": 0).
_COUNT_FIELDS = ("type_vocab_size",)
_SIZE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "n_embd",
    "n_layer",
    "n_head",
    "n_positions",
    "d_model",
    "num_layers",
    "num_heads",
    "dim",
    "n_layers",
    "n_heads",
)


def _check_config(raw: Any, path: Path, t: Any) -> None:
    """Say what is wrong with a malformed config.json, instead of an AttributeError, or
    transformers guessing the architecture from the directory's name (it matches model
    type names as substrings of the path when ``model_type`` is missing)."""
    if not isinstance(raw, dict):
        raise TfparityError(
            f"{path} holds a JSON {type(raw).__name__}, not an object; a model's config.json "
            'is an object such as {"model_type": "bert", ...}.'
        )
    declared = raw.get("model_type")
    if declared is None:
        raise TfparityError(
            f'{path} has no "model_type"; tfparity does not guess the architecture from the '
            'directory\'s name. Add it, e.g. "model_type": "bert".'
        )
    if not isinstance(declared, str) or declared not in t.CONFIG_MAPPING:
        raise TfparityError(
            f'{path} has "model_type": {json.dumps(declared)}, which transformers does not '
            "know (e.g. bert, roberta, gpt2)."
        )
    for names, least in ((_SIZE_FIELDS, 1), (_COUNT_FIELDS, 0)):
        for name in names:
            value = raw.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < least
            ):
                raise TfparityError(
                    f'{path}: "{name}" is {json.dumps(value)}; it must be a whole number '
                    f">= {least}."
                )


def checkpoint_tokenizer(t: Any, directory: Path, label: str | None = None) -> Any | None:
    """The tokenizer of ``directory`` (None where it holds none). ``label``, the MODEL
    spec the user gave, becomes its ``name_or_path``: reports say whose tokenizer made
    the ids (docs/crosscheck.md), and a spec, unlike the resolved path, is the user's
    own word and holds nothing machine-specific."""
    names = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "tokenizer_config.json")
    if not any((directory / n).exists() for n in names):
        return None
    _refuse_custom_tokenizer(directory)
    try:
        tokenizer = t.AutoTokenizer.from_pretrained(str(directory), trust_remote_code=False)
    except Exception as exc:
        raise TfparityError(f"The tokenizer in {directory} could not be loaded: {exc}") from exc
    if label:
        tokenizer.name_or_path = label
    return tokenizer


def _refuse_custom_tokenizer(directory: Path) -> None:
    """A tokenizer_config.json with ``auto_map`` asks for the checkpoint's own Python
    tokenizer class; transformers would refuse it deep inside with a confusing message
    (or, with trust_remote_code, run it). Say plainly what it is."""
    path = directory / "tokenizer_config.json"
    if not path.exists():
        return
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TfparityError(f"{path} is not readable JSON: {exc}") from exc
    if isinstance(raw, dict) and raw.get("auto_map"):
        raise TfparityError(
            f"{path} asks for a custom tokenizer class (auto_map: "
            f"{json.dumps(raw['auto_map'])[:120]}); tfparity never runs remote code. Use a "
            "checkpoint whose tokenizer is one of transformers' own classes."
        )
