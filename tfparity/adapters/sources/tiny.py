"""``tiny:<model_type>`` models: small, randomly initialised, identical for the same spec.

Weights come from numpy generators seeded by the spec and each variable's name (not
from TensorFlow's initialisers), so the same spec gives the same weights in every
process, on every device, whatever order variables are created in. All tiny models
share a small WordPiece vocabulary shipped with tfparity, so they can tokenize text
offline.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np

VOCAB_FILE = Path(__file__).resolve().parents[2] / "data" / "tiny_vocab.txt"  # tfparity/data
TOKENIZER_LABEL = "tiny vocabulary"  # a tiny model's tokenizer, as reports name it
POSITIONS = 64  # the tokenizer's longest sequence; every tiny config has room for it


def vocab_size() -> int:
    return sum(1 for line in VOCAB_FILE.read_text().splitlines() if line)


def tiny_config(model_type: str) -> Any:
    """The transformers config of ``tiny:<model_type>``: the registry's small config
    (2 layers, 32 wide) over the shared vocabulary, with ``[PAD]`` = 1."""
    from ...architectures import registry
    from ..runtime.imports import import_transformers

    arch = registry().get(model_type)
    if arch is None or arch.tiny is None:
        raise ValueError(f"no tiny config for {model_type!r}")
    config_class = import_transformers().CONFIG_MAPPING[model_type]
    return config_class(**{"vocab_size": vocab_size(), "pad_token_id": 1, **arch.tiny})


def tiny_tokenizer() -> Any:
    """A WordPiece tokenizer over the shipped vocabulary.

    Special ids follow RoBERTa's layout ([CLS]=0, [PAD]=1, [SEP]=2, [UNK]=3, [MASK]=4),
    because TF RoBERTa hard-codes its padding index to 1.
    """
    from ..runtime.imports import import_transformers

    t = import_transformers()
    tokenizer = t.BertTokenizerFast(vocab_file=str(VOCAB_FILE), model_max_length=POSITIONS)
    tokenizer.name_or_path = TOKENIZER_LABEL  # reports say whose tokenizer made the ids
    return tokenizer


def seed_weights(variables: list[Any], seed: str) -> None:
    """Give every trainable variable a value from a generator seeded by ``seed`` and its name.

    Norm scales get ``1 + N(0, 0.1)``; everything else ``N(0, 0.05)``: large enough that
    faults injected in tests (a dropped bias, a wrong epsilon) change the outputs.
    """
    for var in variables:
        if not var.trainable:
            continue  # buffers computed from the config (ESM's rotary inv_freq)
        name = _scope_free_name(var.name)
        rng = np.random.default_rng(zlib.crc32(f"{seed}/{name}".encode()))
        shape = tuple(var.shape)
        if _is_norm_scale(name):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            value = 0.05 * rng.standard_normal(shape)
        var.assign(value.astype(var.dtype.as_numpy_dtype))


def _scope_free_name(name: str) -> str:
    """Drop the instance suffix (``tf_bert_model_3/`` -> ``tf_bert_model/``) Keras adds
    when a process builds the same model twice, so names repeat across instances."""
    return re.sub(r"^([^/]+?)_\d+/", r"\1/", name)


def _is_norm_scale(name: str) -> bool:
    lowered = name.lower()
    return "gamma" in lowered or ("norm" in lowered and lowered.endswith("weight:0"))


def seed_torch_parameters(model: Any, seed: str) -> None:
    """:func:`seed_weights` for a PyTorch model, by parameter name: how the tiny models
    of architectures without a TF class (Llama, Qwen, Gemma) are seeded. Norm scales get
    ``1 + N(0, 0.1)``, everything else ``N(0, 0.05)``, each from a generator seeded by
    ``seed`` and the parameter's name."""
    from ..runtime.imports import import_torch

    torch = import_torch()
    with torch.no_grad():
        for name, param in model.named_parameters():
            rng = np.random.default_rng(zlib.crc32(f"{seed}/{name}".encode()))
            shape = tuple(param.shape)
            lowered = name.lower()
            if "norm" in lowered and lowered.endswith("weight"):
                value = 1.0 + 0.1 * rng.standard_normal(shape)
            else:
                value = 0.05 * rng.standard_normal(shape)
            param.copy_(torch.from_numpy(value.astype(np.float32)))
