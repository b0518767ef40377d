"""Deliberately broken ports of BERT-family, DistilBERT, GPT-2 and ALBERT TF models, to
prove a check can fail.

A parity check that says PASS wrongly is worse than none, so every check should be
seen failing on known faults. Each :class:`Fault` breaks a copy of a loaded
:class:`~tfparity.adapters.tf_model.TFModel` the way real ports break (a dropped bias,
a transposed kernel, the tanh GELU, another LayerNorm epsilon, shifted position
embeddings, wrong attention scaling) and says where the cross-check must localise it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .adapters.tf_model import TFModel


@dataclass(frozen=True)
class Fault:
    """``apply(model)`` returns the broken model (the same object for weight faults).

    ``hidden_state``/``layer``/``component`` are the expected ``first_divergence``;
    ``hint`` is a phrase the hint must contain. Layer numbers assume at least 2 layers.
    """

    name: str
    apply: Callable[[TFModel], TFModel]
    hidden_state: int | None
    layer: str | int
    component: str
    hint: str


def _main(model: TFModel) -> Any:
    return getattr(model.model, model.model.base_model_prefix)


def _zero(var: Any) -> None:
    var.assign(np.zeros(var.shape, var.dtype.as_numpy_dtype))


def _in_place(change: Callable[[Any], None]) -> Callable[[TFModel], TFModel]:
    """A weight fault: ``change`` gets the model's main layer and edits it."""

    def apply(model: TFModel) -> TFModel:
        change(_main(model))
        return model

    return apply


def with_config(**changes: Any) -> Callable[[TFModel], TFModel]:
    """A config.json fault: the same weights in a model built from a changed config."""

    def apply(model: TFModel) -> TFModel:
        from .adapters.loading import build, tf_model_class

        config = model.config.__class__.from_dict({**model.config.to_dict(), **changes})
        broken = tf_model_class(config).from_config(config)
        build(broken)
        for target, source in zip(broken.weights, model.model.weights, strict=True):
            target.assign(source)
        return TFModel(f"{model.name} (broken)", broken, model.tokenizer, config)

    return apply


def _roll_rows(var: Any) -> None:
    var.assign(np.roll(var.numpy(), 1, axis=0))


def _transpose(var: Any) -> None:
    var.assign(var.numpy().T)


def _reverse_rows(var: Any) -> None:
    var.assign(var.numpy()[::-1].copy())


def _scale(var: Any, factor: float) -> None:
    var.assign(var.numpy() * factor)


def _unscaled_attention(main: Any) -> None:
    main.encoder.layer[1].attention.self_attention.sqrt_att_head_size = 1.0


CATALOGUE: tuple[Fault, ...] = (
    Fault(
        "zeroed attention query bias",
        _in_place(lambda m: _zero(m.encoder.layer[1].attention.self_attention.query.bias)),
        2,
        1,
        "attention",
        "all zeros",
    ),
    Fault(
        "transposed attention output kernel",
        _in_place(lambda m: _transpose(m.encoder.layer[0].attention.dense_output.dense.kernel)),
        1,
        0,
        "attention",
        "transposed",
    ),
    Fault(
        "wrong attention scaling", _in_place(_unscaled_attention), 2, 1, "attention", "computation"
    ),
    Fault(
        "dropped intermediate bias",
        _in_place(lambda m: _zero(m.encoder.layer[0].intermediate.dense.bias)),
        1,
        0,
        "intermediate",
        "all zeros",
    ),
    Fault(
        "gelu_new instead of gelu",
        with_config(hidden_act="gelu_new"),
        1,
        0,
        "intermediate",
        "gelu_new",
    ),
    Fault(
        "dropped output bias",
        _in_place(lambda m: _zero(m.encoder.layer[1].bert_output.dense.bias)),
        2,
        1,
        "output",
        "all zeros",
    ),
    Fault(
        "LayerNorm gamma off by 1%",
        _in_place(lambda m: _scale(m.encoder.layer[1].bert_output.LayerNorm.gamma, 1.01)),
        2,
        1,
        "output",
        "LayerNorm.weight",
    ),
    Fault(
        "shifted position embeddings",
        _in_place(lambda m: _roll_rows(m.embeddings.position_embeddings)),
        0,
        "embeddings",
        "embeddings",
        "shifted",
    ),
    Fault(
        "swapped token type rows",
        _in_place(lambda m: _reverse_rows(m.embeddings.token_type_embeddings)),
        0,
        "embeddings",
        "embeddings",
        "token_type_embeddings",
    ),
    Fault(
        "LayerNorm epsilon 1e-5 vs 1e-12",
        with_config(layer_norm_eps=1e-5),
        0,
        "embeddings",
        "embeddings",
        "layer_norm_eps",
    ),
    Fault(
        "zeroed pooler kernel",
        _in_place(lambda m: _zero(m.pooler.dense.kernel)),
        None,
        "pooler",
        "pooler",
        "pooler.dense.weight is all zeros",
    ),
    Fault(
        "zeroed pooler bias",
        _in_place(lambda m: _zero(m.pooler.dense.bias)),
        None,
        "pooler",
        "pooler",
        "pooler",
    ),
)


def _block(main: Any, i: int) -> Any:
    return main.transformer.layer[i]


DISTILBERT_CATALOGUE: tuple[Fault, ...] = (
    Fault(
        "zeroed attention query bias",
        _in_place(lambda m: _zero(_block(m, 1).attention.q_lin.bias)),
        2,
        1,
        "attention",
        "q_lin.bias is all zeros",
    ),
    Fault(
        "transposed attention output kernel",
        _in_place(lambda m: _transpose(_block(m, 0).attention.out_lin.kernel)),
        1,
        0,
        "attention",
        "transposed",
    ),
    Fault(
        "dropped FFN up-projection bias",
        _in_place(lambda m: _zero(_block(m, 0).ffn.lin1.bias)),
        1,
        0,
        "intermediate",
        "lin1.bias is all zeros",
    ),
    Fault(
        "gelu_new instead of gelu",
        with_config(activation="gelu_new"),
        1,
        0,
        "intermediate",
        "TF's matches gelu_new",
    ),
    Fault(
        "dropped FFN down-projection bias",
        _in_place(lambda m: _zero(_block(m, 1).ffn.lin2.bias)),
        2,
        1,
        "output",
        "lin2.bias is all zeros",
    ),
    Fault(
        "LayerNorm gamma off by 1%",
        _in_place(lambda m: _scale(_block(m, 0).output_layer_norm.gamma, 1.01)),
        1,
        0,
        "output",
        "output_layer_norm.weight differs",
    ),
    Fault(
        "shifted position embeddings",
        _in_place(lambda m: _roll_rows(m.embeddings.position_embeddings)),
        0,
        "embeddings",
        "embeddings",
        "shifted by",
    ),
)


def _h(main: Any, i: int) -> Any:
    return main.h[i]


GPT2_CATALOGUE: tuple[Fault, ...] = (
    Fault(
        "zeroed attention bias",
        _in_place(lambda m: _zero(_h(m, 1).attn.c_attn.bias)),
        2,
        1,
        "attention",
        "h.1.attn.c_attn.bias is all zeros",
    ),
    Fault(
        "ln_1 (pre-attention) gamma off by 1%",
        _in_place(lambda m: _scale(_h(m, 0).ln_1.gamma, 1.01)),
        1,
        0,
        "attention",
        "h.0.ln_1.weight differs",
    ),
    Fault(
        "dropped FFN up-projection bias",
        _in_place(lambda m: _zero(_h(m, 0).mlp.c_fc.bias)),
        1,
        0,
        "intermediate",
        "h.0.mlp.c_fc.bias is all zeros",
    ),
    Fault(
        "exact gelu instead of gelu_new",
        with_config(activation_function="gelu"),
        1,
        0,
        "intermediate",
        "activation_function",
    ),
    Fault(
        "dropped FFN down-projection bias",
        _in_place(lambda m: _zero(_h(m, 1).mlp.c_proj.bias)),
        2,
        1,
        "output",
        "h.1.mlp.c_proj.bias is all zeros",
    ),
    Fault(
        "shifted position embeddings",
        _in_place(lambda m: _roll_rows(m.wpe.embeddings)),
        0,
        "embeddings",
        "embeddings",
        "shifted by",
    ),
)


def _shared(main: Any) -> Any:
    """ALBERT's one layer, used by every layer: a fault there shows from layer 0 on."""
    return main.encoder.albert_layer_groups[0].albert_layers[0]


ALBERT_CATALOGUE: tuple[Fault, ...] = (
    Fault(
        "zeroed attention query bias",
        _in_place(lambda m: _zero(_shared(m).attention.query.bias)),
        1,
        0,
        "attention",
        "attention.query.bias is all zeros",
    ),
    Fault(
        "dropped FFN up-projection bias",
        _in_place(lambda m: _zero(_shared(m).ffn.bias)),
        1,
        0,
        "intermediate",
        "ffn.bias is all zeros",
    ),
    Fault(
        "exact gelu instead of gelu_new",
        with_config(hidden_act="gelu"),
        1,
        0,
        "intermediate",
        "TF's matches gelu (exact erf)",
    ),
    Fault(
        "dropped FFN down-projection bias",
        _in_place(lambda m: _zero(_shared(m).ffn_output.bias)),
        1,
        0,
        "output",
        "ffn_output.bias is all zeros",
    ),
    Fault(
        "LayerNorm gamma off by 1%",
        _in_place(lambda m: _scale(_shared(m).full_layer_layer_norm.gamma, 1.01)),
        1,
        0,
        "output",
        "full_layer_layer_norm.weight differs",
    ),
    Fault(
        "dropped embedding projection bias",
        _in_place(lambda m: _zero(m.encoder.embedding_hidden_mapping_in.bias)),
        0,
        "embeddings",
        "embeddings",
        "embedding_hidden_mapping_in.bias is all zeros",
    ),
)

CATALOGUES = {
    "bert": CATALOGUE,
    "distilbert": DISTILBERT_CATALOGUE,
    "gpt2": GPT2_CATALOGUE,
    "albert": ALBERT_CATALOGUE,
}


def catalogue_for(model_type: str) -> tuple[Fault, ...]:
    """The faults written for ``model_type``'s module layout (BERT's by default: RoBERTa
    and ELECTRA share it)."""
    return CATALOGUES.get(model_type, CATALOGUE)


def by_name(name: str, model_type: str = "bert") -> Fault:
    return next(f for f in catalogue_for(model_type) if f.name == name)
