"""GPT-2 (and GPT-SW3, which shares its classes): a causal, pre-LayerNorm decoder.

``h[i]`` computes ``x + attn(ln_1(x))``, then ``+ mlp(ln_2(.))``. ``attention`` is the
first residual sum (``ln_2``'s input), ``intermediate`` the activation (``mlp.c_proj``'s
input), ``output`` the block's output. No LayerNorm follows the FFN, so there are no
numeric FFN hints. Position embeddings (``wpe``) sit beside the word matrix (``wte``),
which also embeds token types.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .base import Architecture, EmbeddingTables, LMHead, Positions, hf_classes
from .faults import Fault, Part, Parts, Setting, decoder_faults
from .keras_hub_layouts import (
    KerasHubLayout,
    block_config,
    pre_norm_decoder_taps,
    preset_fields,
)
from .sublayers import FeedForward, SameBlocks, Tap, decoder_taps, extended_mask

TINY = dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=2)


def _h(main: Any, i: int) -> Any:
    return main.h[i]


class Gpt2Layout(SameBlocks):
    @staticmethod
    def block_taps(block: Any) -> dict[str, Tap]:
        return decoder_taps(block, Tap(block.ln_2, "in"), block.mlp.c_proj)

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        block = _h(main, i)
        a = block.attn(block.ln_1(x), None, extended_mask(mask), None, None, None, False, False)[0]
        pt_attn = pt(f"layer_{i}.attention")
        return {
            "attention": x + a,
            "intermediate": block.mlp.act(block.mlp.c_fc(block.ln_2(pt_attn))),
            "output": pt_attn + block.mlp.c_proj(pt(f"layer_{i}.intermediate")),
        }

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return ["wte.", "wpe."] if component == "embeddings" else []
        parts = {
            "attention": ("ln_1.", "attn."),
            "intermediate": ("ln_2.", "mlp.c_fc."),
            "output": ("mlp.c_proj.",),
        }[component]
        return [f"h.{layer}.{part}" for part in parts]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        return None


BLOCK = "h.{i}."
FAULTS: tuple[Fault, ...] = decoder_faults(
    Parts(
        # c_attn: the query, key and value projections in one
        query_bias=Part(
            BLOCK + "attn.c_attn.bias",
            pt_name=BLOCK + "attn.c_attn.bias",
            name="zeroed attention bias",
        ),
        attention_norm=Part(
            BLOCK + "ln_1.gamma",
            pt_name=BLOCK + "ln_1.weight",
            name="ln_1 (pre-attention) gamma off by 1%",
        ),
        intermediate_bias=Part(BLOCK + "mlp.c_fc.bias", pt_name=BLOCK + "mlp.c_fc.bias"),
        activation=Setting(
            name="exact gelu instead of gelu_new", field="activation_function", value="gelu"
        ),
        output_bias=Part(BLOCK + "mlp.c_proj.bias", pt_name=BLOCK + "mlp.c_proj.bias"),
        position_table=Part("wpe.embeddings", hint="shifted by"),
    )
)

GPT2 = Architecture(
    model_type="gpt2",
    family="gpt2",
    **hf_classes("GPT2", "LMHeadModel"),
    tiny=TINY,
    positions=Positions.ABSOLUTE,
    causal=True,
    embeddings=EmbeddingTables(position="wpe", token_type=None, layer_norm=None),
    lm_head=LMHead(
        "no transform, no bias: x @ wte.T (the final LayerNorm ln_f is in the body)",
        lambda m, tf: lambda h: tf.matmul(h, m.get_input_embeddings().embeddings, transpose_b=True),
        tied_only="lm_head.weight",  # TFGPT2LMHeadModel has no lm_head of its own
    ),
    sublayers=Gpt2Layout(),
    hint_fields=("activation_function", "layer_norm_epsilon", "n_inner", "scale_attn_weights"),
    faults=FAULTS,
    ffn_weight="h.{layer}.mlp.c_fc.weight",
    keras_hub=KerasHubLayout(
        backbone="GPT2Backbone",
        block_taps=pre_norm_decoder_taps,
        final_norm="layer_norm",
        effective_config=block_config("activation_function", None),
        preset_config=preset_fields(
            {
                "hidden_dim": "n_embd",
                "intermediate_dim": "n_inner",
                "num_layers": "n_layer",
                "num_heads": "n_head",
                "max_sequence_length": "n_positions",
            }
        ),
    ),
)

ARCHITECTURES = (GPT2, replace(GPT2, model_type="gpt-sw3", faults=(), keras_hub=None))
