"""MPNet: BERT-like layers with a relative position bias in attention on top of a
padding-aware absolute table (positions from ``input_ids`` count from
``padding_idx + 1``, as in RoBERTa).

``encoder.layer[i]`` holds ``attention`` (self-attention + ``o`` + residual +
LayerNorm), ``intermediate`` and the FFN output (TF names it ``out``, PyTorch
``output``). The relative position bias is computed once by the encoder
(``compute_position_bias``, a table shared by all layers) and fed to each layer, so
isolation computes it the same way and attention weight hints include the table.
"""

from __future__ import annotations

from typing import Any

from .base import Architecture, EmbeddingTables, LocalWindow, Positions, hf_classes
from .bert import EPSILON, FFN_WEIGHT, GELU_NEW, TINY, BertLayout
from .faults import Expect, Fault, Part, Parts, encoder_faults, in_place, zero
from .sublayers import FeedForward, extended_mask

BIAS_TABLE = "encoder.relative_attention_bias."


class MPNetLayout(BertLayout):
    TF_OUTPUT = "out"

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        layer = main.encoder.layer[i]
        bias = main.encoder.compute_position_bias(x)  # as the encoder makes it
        attn = layer.attention(
            x, extended_mask(mask), None, False, position_bias=bias, training=False
        )[0]
        pt_attn = pt(f"layer_{i}.attention")
        inter = layer.intermediate(pt_attn)
        out = layer.out(pt(f"layer_{i}.intermediate"), pt_attn, training=False)
        return {"attention": attn, "intermediate": inter, "output": out}

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return [f"{component}."] if component in ("embeddings", "pooler") else []
        shared = [BIAS_TABLE] if component == "attention" else []
        return [f"encoder.layer.{layer}.{component}.", *shared]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        layer = main.encoder.layer[i]
        return FeedForward(
            layer.intermediate.dense, layer.out.dense, layer.out.LayerNorm, config.hidden_act
        )


LAYER = "encoder.layer.{i}."
FAULTS: tuple[Fault, ...] = encoder_faults(
    Parts(
        query_bias=Part(LAYER + "attention.attn.q.bias", pt_name=LAYER + "attention.attn.q.bias"),
        attention_norm=Part(
            LAYER + "attention.LayerNorm.gamma", pt_name=LAYER + "attention.LayerNorm.weight"
        ),
        activation=GELU_NEW,
        output_bias=Part(LAYER + "out.dense.bias", pt_name=LAYER + "output.dense.bias"),
        norm_epsilon=EPSILON,
    ),
    extra=(
        Fault(
            name="zeroed relative position bias table",
            apply=in_place(lambda m: zero(m.encoder.relative_attention_bias)),
            expect=Expect.at(
                layer=0, component="attention", hint=BIAS_TABLE + "weight is all zeros"
            ),
        ),
    ),
)

ARCHITECTURES = (
    Architecture(
        model_type="mpnet",
        family="mpnet",
        **hf_classes("MPNet"),
        tiny={**TINY, "max_position_embeddings": TINY["max_position_embeddings"] + 2},
        positions=Positions.PADDING_AWARE,
        # beside its position table, a bias by bucketed relative distance in attention
        local_window=LocalWindow("relative attention bias"),
        embeddings=EmbeddingTables(token_type=None),
        sublayers=MPNetLayout(),
        hint_fields=("hidden_act", "layer_norm_eps", "relative_attention_num_buckets"),
        faults=FAULTS,
        ffn_weight=FFN_WEIGHT,
    ),
)
