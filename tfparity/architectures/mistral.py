"""Mistral: a causal, pre-RMSNorm decoder with rotary positions, grouped-query
attention and a gated (SwiGLU) FFN. TF's ``get_input_embeddings()`` is broken for it
(the main layer has no such method), so the word matrix is read as ``embed_tokens``.

``layers[i]`` computes ``x + self_attn(input_layernorm(x))`` (the ``attention`` tap,
``post_attention_layernorm``'s input), ``act(gate_proj(n)) * up_proj(n)`` on the normed
sum (``intermediate``, read as ``mlp.down_proj``'s input) and the block's output
(``output``). No norm follows the FFN and the activation is gated, so there are no
numeric FFN hints; config hints name ``hidden_act`` and ``rms_norm_eps``. Nothing has a
bias, so the faults scale weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Architecture, KnownDifference, Positions, hf_classes
from .faults import Expect, Fault, Part, Parts, Setting, decoder_faults, in_place, scale
from .llama import DECODER_TABLES, DECODER_TINY, HINT_FIELDS, GatedDecoderLayout, keras_hub_decoder
from .sublayers import Tap, layer_taps


def _layer(main: Any, i: int) -> Any:
    return main.layers[i]


class MistralLayout(GatedDecoderLayout):
    """Llama's layer layout, with the HF TF side: the same taps in ``main.layers``."""

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return layer_taps(main.layers, self.block_taps)

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        block = _layer(main, i)
        # The causal + padding mask and the position ids exactly as TF's main layer
        # makes them (no cache).
        batch, seq = int(mask.shape[0]), int(mask.shape[1])
        causal = main._prepare_decoder_attention_mask(mask, (batch, seq), x, 0)
        positions = np.arange(seq, dtype=np.int64)[None, :]
        a = block.self_attn(
            hidden_states=block.input_layernorm(x),
            attention_mask=causal,
            position_ids=positions,
            training=False,
        )[0]
        pt_attn = pt(f"layer_{i}.attention")
        mlp, h = block.mlp, block.post_attention_layernorm(pt_attn)
        return {
            "attention": x + a,
            "intermediate": mlp.act_fn(mlp.gate_proj(h)) * mlp.up_proj(h),
            "output": pt_attn + mlp.down_proj(pt(f"layer_{i}.intermediate")),
        }


LAYER = "layers.{i}."
FAULTS: tuple[Fault, ...] = decoder_faults(
    Parts(
        query_kernel=Part(
            LAYER + "self_attn.q_proj.kernel",
            pt_name=LAYER + "self_attn.q_proj.weight",
            name="query projection off by 10%",
        ),
        attention_norm=Part(
            LAYER + "input_layernorm.weight",
            pt_name=LAYER + "input_layernorm.weight",
            name="pre-attention RMSNorm weight off by 1%",
        ),
        norm_epsilon=Setting(name="RMSNorm epsilon 1e-5 vs 1e-6", field="rms_norm_eps", value=1e-5),
        activation=Setting(name="gelu instead of silu", field="hidden_act", value="gelu"),
        output_kernel=Part(LAYER + "mlp.down_proj.kernel", pt_name=LAYER + "mlp.down_proj.weight"),
    ),
    extra=(
        Fault(
            name="attention output projection off by 10%",
            apply=in_place(lambda m: scale(_layer(m, 0).self_attn.o_proj.kernel, 1.1)),
            expect=Expect.at(
                layer=0,
                component="attention",
                hint="layers.0.self_attn.o_proj.weight is PyTorch's scaled by 1.1",
            ),
        ),
    ),
)

ARCHITECTURES = (
    Architecture(
        model_type="mistral",
        family="mistral",
        **hf_classes("Mistral", "ForCausalLM"),
        tiny={**DECODER_TINY, "sliding_window": None},
        positions=Positions.ROTARY,
        causal=True,
        embeddings=DECODER_TABLES,
        sublayers=MistralLayout(),
        hint_fields=HINT_FIELDS,
        faults=FAULTS,
        ffn_weight="layers.{layer}.mlp.up_proj.weight",
        keras_hub=keras_hub_decoder(
            "MistralBackbone",
            known_difference=KnownDifference(
                hidden_state=0,
                layer="embeddings",
                component="embeddings",
                hint="casts embed_tokens.weight to float16",
                finding="convert_mistral.py casts the token embedding (and lm_head) to "
                "float16 before assigning them to float32 variables: a lossy conversion "
                "(embeddings off by up to ~6e-5 on the tiny model)",
            ),
        ),
    ),
)
