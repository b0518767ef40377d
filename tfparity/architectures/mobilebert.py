"""MobileBERT: narrow bottleneck blocks (``true_hidden_size``) inside a wide body, with
stacked FFNs, ``no_norm`` (an elementwise affine) instead of LayerNorm, and a trigram
embedding projection.

``encoder.layer[i]`` runs ``bottleneck`` (wide -> narrow inputs), ``attention`` (self-
attention + dense + residual + norm, narrow: the ``attention`` tap), the stacked FFNs
``ffn[j]``, ``intermediate`` (the last FFN's up-projection + activation) and the output
(TF ``mobilebert_output``, PyTorch ``output``: down-projection + residual + norm, then
the output bottleneck back to the wide body with the block input as residual: the
``output`` tap). The stacked FFNs count as ``intermediate``: isolation runs them and
the last up-projection on PyTorch's attention output. Numeric FFN hints need the
activation's input to be the attention output (one FFN) and there is no norm right
after the down-projection (the output bottleneck follows), so only the activation hint.
"""

from __future__ import annotations

from typing import Any

from .base import Architecture, LocalWindow, Positions, hf_classes
from .bert import TINY, BertLayout
from .faults import Expect, Fault, Part, Parts, Setting, encoder_faults, in_place, zero
from .sublayers import FeedForward, extended_mask


def _layer(main: Any, i: int) -> Any:
    return main.encoder.layer[i]


def _stacked(layer: Any, x: Any) -> Any:
    for ffn in getattr(layer, "ffn", None) or ():
        x = ffn(x)
    return x


class MobileBertLayout(BertLayout):
    TF_OUTPUT = "mobilebert_output"

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        layer = _layer(main, i)
        if layer.use_bottleneck:
            q, k, v, layer_input = layer.bottleneck(x)
        else:
            q = k = v = layer_input = x
        attn = layer.attention(
            q, k, v, layer_input, extended_mask(mask), None, False, training=False
        )[0]
        ffn_in = _stacked(layer, pt(f"layer_{i}.attention"))
        inter = layer.intermediate(ffn_in)
        out = layer.mobilebert_output(pt(f"layer_{i}.intermediate"), ffn_in, x, training=False)
        return {"attention": attn, "intermediate": inter, "output": out}

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return [f"{component}."] if component in ("embeddings", "pooler") else []
        parts = {
            "attention": ("bottleneck.", "attention."),
            "intermediate": ("ffn.", "intermediate."),
            "output": ("output.",),
        }[component]
        return [f"encoder.layer.{layer}.{part}" for part in parts]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        if config.num_feedforward_networks != 1:  # the activation reads the FFN stack
            return None
        layer = _layer(main, i)
        down = layer.mobilebert_output.dense
        return FeedForward(layer.intermediate.dense, down, None, config.hidden_act)


LAYER = "encoder.layer.{i}."
FAULTS: tuple[Fault, ...] = encoder_faults(
    Parts(
        # the input bottleneck's norm, before attention
        attention_norm=Part(
            LAYER + "bottleneck.bottleneck_input.LayerNorm.weight",
            pt_name=LAYER + "bottleneck.input.LayerNorm.weight",
            name="input bottleneck NoNorm weight off by 1%",
        ),
        # the first of the stacked FFNs' up-projection
        intermediate_bias=Part(
            LAYER + "ffn.0.intermediate.dense.bias",
            pt_name=LAYER + "ffn.0.intermediate.dense.bias",
            name="dropped stacked FFN bias",
        ),
        activation=Setting(name="gelu instead of relu", field="hidden_act", value="gelu"),
        output_bias=Part(
            LAYER + "mobilebert_output.dense.bias", pt_name=LAYER + "output.dense.bias"
        ),
    ),
    extra=(
        Fault(
            name="zeroed attention value bias",
            apply=in_place(lambda m: zero(_layer(m, 1).attention.self.value.bias)),
            expect=Expect.at(
                layer=1,
                component="attention",
                hint="encoder.layer.1.attention.self.value.bias is all zeros",
            ),
        ),
    ),
)

ARCHITECTURES = (
    Architecture(
        model_type="mobilebert",
        family="mobilebert",
        **hf_classes("MobileBert"),
        tiny={
            **TINY,
            "embedding_size": 16,
            "intra_bottleneck_size": 16,
            "true_hidden_size": 16,
            "num_feedforward_networks": 2,
        },
        positions=Positions.ABSOLUTE,
        # the trigram input concatenates each token's embedding with its neighbours'
        local_window=LocalWindow("trigram input embeddings", tokens=3, when="trigram_input"),
        sublayers=MobileBertLayout(),
        hint_fields=(
            "hidden_act",
            "normalization_type",
            "layer_norm_eps",
            "use_bottleneck",
            "key_query_shared_bottleneck",
            "num_feedforward_networks",
            "trigram_input",
        ),
        faults=FAULTS,
        ffn_weight="encoder.layer.{layer}.intermediate.dense.weight",
    ),
)
