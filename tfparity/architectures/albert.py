"""ALBERT: one transformer layer shared by every layer, behind an embedding projection.

The sub-layer layout holds for ``num_hidden_groups == inner_group_num == 1`` (as
released): the shared layer's ``attention`` (with its residual and LayerNorm), ``ffn``
+ activation, ``ffn_output`` + residual + ``full_layer_layer_norm``, recorded once per
call. The pooler is not tapped: TF applies its tanh inside the layer, PyTorch in a
separate module. A weight fault in the shared layer shows from layer 0 on.
"""

from __future__ import annotations

from typing import Any

from .base import Architecture, LMHead, Positions, hf_classes
from .bert import HINT_FIELDS, TINY
from .faults import Expect, Fault, Part, Parts, Setting, encoder_faults, in_place, zero
from .keras_hub_layouts import (
    KerasHubLayout,
    encoder_config,
    encoder_feed_forward,
    post_norm_encoder_taps,
    preset_fields,
)
from .sublayers import FeedForward, Tap, extended_mask

SHARED = "encoder.albert_layer_groups.0.albert_layers.0."  # every layer's weights


def _shared(main: Any) -> Any:
    return main.encoder.albert_layer_groups[0].albert_layers[0]


class AlbertLayout:
    def applies(self, config: Any) -> bool:
        return config.num_hidden_groups == 1 and config.inner_group_num == 1

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return self._taps(main)

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        return self._taps(model)

    @staticmethod
    def _taps(main: Any) -> dict[str, Tap]:
        layer = _shared(main)
        return {
            "embeddings": Tap(main.embeddings),
            "attention": Tap(layer.attention, shared=True),
            "intermediate": Tap(layer.ffn_output, "in", shared=True),
            "output": Tap(layer.full_layer_layer_norm, shared=True),
        }

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        layer = _shared(main)
        attn = layer.attention(
            input_tensor=x,
            attention_mask=extended_mask(mask),
            head_mask=None,
            output_attentions=False,
            training=False,
        )[0]
        pt_attn = pt(f"layer_{i}.attention")
        return {
            "attention": attn,
            "intermediate": layer.activation(layer.ffn(pt_attn)),
            "output": layer.full_layer_layer_norm(
                layer.ffn_output(pt(f"layer_{i}.intermediate")) + pt_attn
            ),
        }

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            if component == "embeddings":
                return ["embeddings.", "encoder.embedding_hidden_mapping_in."]
            return ["pooler."] if component == "pooler" else []
        parts = {
            "attention": ("attention.",),
            "intermediate": ("ffn.",),
            "output": ("ffn_output.", "full_layer_layer_norm."),
        }[component]
        return [SHARED + part for part in parts]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        layer = _shared(main)
        return FeedForward(
            layer.ffn, layer.ffn_output, layer.full_layer_layer_norm, config.hidden_act
        )


FAULTS: tuple[Fault, ...] = encoder_faults(
    Parts(
        shared=True,
        query_bias=Part(SHARED + "attention.query.bias", pt_name="attention.query.bias"),
        intermediate_bias=Part(SHARED + "ffn.bias", pt_name="ffn.bias"),
        activation=Setting(
            name="exact gelu instead of gelu_new",
            field="hidden_act",
            value="gelu",
            hint="TF's matches gelu (exact erf)",
        ),
        output_bias=Part(SHARED + "ffn_output.bias", pt_name="ffn_output.bias"),
        output_norm=Part(
            SHARED + "full_layer_layer_norm.gamma", pt_name="full_layer_layer_norm.weight"
        ),
    ),
    extra=(
        Fault(
            name="dropped embedding projection bias",
            apply=in_place(lambda m: zero(m.encoder.embedding_hidden_mapping_in.bias)),
            expect=Expect.at(
                layer="embeddings",
                component="embeddings",
                hint="embedding_hidden_mapping_in.bias is all zeros",
            ),
        ),
    ),
)

ARCHITECTURES = (
    Architecture(
        model_type="albert",
        family="albert",
        **hf_classes("Albert"),
        tiny={**TINY, "embedding_size": 16},
        positions=Positions.ABSOLUTE,
        lm_head=LMHead(
            "dense (H->E) + {act} + LayerNorm, then x @ word_embeddings.T + bias[vocab]",
            lambda m, tf: m.predictions,
        ),
        sublayers=AlbertLayout(),
        hint_fields=(*HINT_FIELDS, "embedding_size", "num_hidden_groups", "inner_group_num"),
        faults=FAULTS,
        ffn_weight="encoder.albert_layer_groups.0.albert_layers.0.ffn.weight",
        shared_layers=True,
        keras_hub=KerasHubLayout(
            backbone="AlbertBackbone",
            block_taps=post_norm_encoder_taps,
            embeddings="embeddings_layer_norm",
            pooler="pooled_dense",
            feed_forward=encoder_feed_forward,
            effective_config=encoder_config,
            preset_config=preset_fields(
                {
                    "embedding_dim": "embedding_size",
                    "num_groups": "num_hidden_groups",
                    "num_inner_repetitions": "inner_group_num",
                }
            ),
        ),
    ),
)
