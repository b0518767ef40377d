"""``tiny:<arch>`` models: small, randomly initialised, identical for the same spec.

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

VOCAB_FILE = Path(__file__).resolve().parent.parent / "data" / "tiny_vocab.txt"
HIDDEN, LAYERS, HEADS, FFN, POSITIONS = 32, 2, 4, 64, 64


def vocab_size() -> int:
    return sum(1 for line in VOCAB_FILE.read_text().splitlines() if line)


def tiny_config(arch: str) -> Any:
    """A transformers config for a 2-layer, 32-wide model of ``arch``."""
    from .runtime import import_transformers

    t = import_transformers()
    common = dict(vocab_size=vocab_size(), pad_token_id=1)
    bert_like = dict(
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=FFN,
        max_position_embeddings=POSITIONS,
        **common,
    )
    if arch == "bert":
        return t.BertConfig(**bert_like)
    if arch == "roberta":
        # TF RoBERTa hard-codes padding_idx = 1; positions start after it.
        return t.RobertaConfig(
            **{**bert_like, "max_position_embeddings": POSITIONS + 2},
            bos_token_id=0,
            eos_token_id=2,
            type_vocab_size=1,
        )
    if arch == "electra":
        return t.ElectraConfig(embedding_size=16, **bert_like)
    if arch == "albert":
        return t.AlbertConfig(embedding_size=16, **bert_like)
    if arch == "distilbert":
        return t.DistilBertConfig(
            dim=HIDDEN,
            n_layers=LAYERS,
            n_heads=HEADS,
            hidden_dim=FFN,
            max_position_embeddings=POSITIONS,
            **common,
        )
    if arch == "gpt2":
        return t.GPT2Config(
            n_embd=HIDDEN,
            n_layer=LAYERS,
            n_head=HEADS,
            n_positions=POSITIONS,
            bos_token_id=0,
            eos_token_id=2,
            **common,
        )
    if arch == "xlnet":
        return t.XLNetConfig(
            d_model=HIDDEN, n_layer=LAYERS, n_head=HEADS, d_inner=FFN, use_mems_eval=False, **common
        )
    if arch == "t5":
        return t.T5Config(
            d_model=HIDDEN,
            d_kv=HIDDEN // HEADS,
            d_ff=FFN,
            num_layers=LAYERS,
            num_heads=HEADS,
            decoder_start_token_id=1,
            eos_token_id=2,
            **common,
        )
    raise ValueError(f"no tiny config for {arch!r}")


def tiny_tokenizer() -> Any:
    """A WordPiece tokenizer over the shipped vocabulary.

    Special ids follow RoBERTa's layout ([CLS]=0, [PAD]=1, [SEP]=2, [UNK]=3, [MASK]=4),
    because TF RoBERTa hard-codes its padding index to 1.
    """
    from .runtime import import_transformers

    t = import_transformers()
    return t.BertTokenizerFast(vocab_file=str(VOCAB_FILE), model_max_length=POSITIONS)


def seed_weights(variables: list[Any], seed: str) -> None:
    """Assign every variable a value drawn from a generator seeded by ``seed`` and its name.

    Norm scales get ``1 + N(0, 0.1)``; everything else ``N(0, 0.05)``: large enough that
    faults injected in tests (a dropped bias, a wrong epsilon) change the outputs.
    """
    for var in variables:
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
