"""OpenAI GPT: a causal, post-LayerNorm decoder with learned positions
(``positions_embed`` beside ``tokens_embed``) and no final LayerNorm.

``h[i]`` computes ``n = ln_1(x + attn(x))`` (the ``attention`` tap), the activation of
``mlp.c_fc(n)`` (``intermediate``, read as ``mlp.c_proj``'s input) and
``ln_2(n + mlp.c_proj(.))`` (``output``).

A finding about transformers 4.x: PyTorch maps ``afn="gelu"`` to ``gelu_new`` (the tanh
approximation, ``ACT_FNS`` in ``modeling_openai.py``) while TF hard-codes
``get_tf_activation("gelu")`` (exact erf) in ``TFMLP``. The two frameworks differ on
the same weights, and the cross-check fails at layer 0, intermediate.
"""

from __future__ import annotations

from typing import Any

from .base import (
    Architecture,
    EmbeddingTables,
    KnownDifference,
    LMHead,
    Positions,
    hf_classes,
)
from .sublayers import FeedForward, SameBlocks, Tap, decoder_taps, extended_mask


class OpenAIGPTLayout(SameBlocks):
    @staticmethod
    def block_taps(block: Any) -> dict[str, Tap]:
        return decoder_taps(block, Tap(block.ln_1), block.mlp.c_proj)

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        block = main.h[i]
        a = block.attn(x, extended_mask(mask), None, False, training=False)[0]
        pt_attn = pt(f"layer_{i}.attention")
        return {
            "attention": block.ln_1(x + a),
            "intermediate": block.mlp.act(block.mlp.c_fc(pt_attn)),
            "output": block.ln_2(pt_attn + block.mlp.c_proj(pt(f"layer_{i}.intermediate"))),
        }

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return ["tokens_embed.", "positions_embed."] if component == "embeddings" else []
        parts = {
            "attention": ("attn.", "ln_1."),
            "intermediate": ("mlp.c_fc.",),
            "output": ("mlp.c_proj.", "ln_2."),
        }[component]
        return [f"h.{layer}.{part}" for part in parts]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        block = main.h[i]
        return FeedForward(block.mlp.c_fc, block.mlp.c_proj, block.ln_2, config.afn)


ARCHITECTURES = (
    Architecture(
        model_type="openai-gpt",
        family="openai-gpt",
        **hf_classes("OpenAIGPT", "LMHeadModel"),
        tiny=dict(n_embd=32, n_layer=2, n_head=4, n_positions=64),
        positions=Positions.ABSOLUTE,
        causal=True,
        embeddings=EmbeddingTables(
            position="positions_embed",
            token_type=None,
            layer_norm=None,
        ),
        # TFOpenAIGPTLMHeadModel's logits: tokens_embed in "linear" mode (no get_lm_head)
        lm_head=LMHead(
            "no transform, no bias: x @ tokens_embed.T",
            lambda m, tf: lambda h: m.transformer.tokens_embed(h, mode="linear"),
            tied_only="lm_head.weight",
        ),
        sublayers=OpenAIGPTLayout(),
        hint_fields=("afn", "layer_norm_epsilon"),
        ffn_weight="h.{layer}.mlp.c_fc.weight",
        known_difference=KnownDifference(
            1,
            0,
            "intermediate",
            "TF's matches gelu (exact erf)",
            "transformers' TFMLP hard-codes the exact GELU; PyTorch maps afn='gelu' to "
            "gelu_new (tanh approximation)",
        ),
    ),
)
