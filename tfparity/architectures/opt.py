"""OPT: a causal decoder with learned positions made from the attention mask (offset
by 2), the same on both paths; ``word_embed_proj_dim`` projects the embeddings in and
out.

``decoder.layers[i]`` is pre-LayerNorm (``do_layer_norm_before``, every size but 350m):
``x + self_attn(self_attn_layer_norm(x))`` is the ``attention`` tap (the input of
``final_layer_norm``), the activation of ``fc1(final_layer_norm(.))`` is
``intermediate`` (read as ``fc2``'s input) and the block's output is ``output``. The
post-LayerNorm layout (350m) taps ``self_attn_layer_norm``'s output instead, and there
``final_layer_norm`` follows the FFN, so it gets numeric FFN hints too.
"""

from __future__ import annotations

from typing import Any

from .base import Architecture, EmbeddingTables, LMHead, Positions, hf_classes
from .faults import Fault, Part, Parts, Setting, decoder_faults
from .sublayers import AlwaysApplies, FeedForward, Tap


def _layer(main: Any, i: int) -> Any:
    return main.decoder.layers[i]


class OptLayout(AlwaysApplies):
    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return self._taps(main.decoder.layers, flat=False)

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        # PyTorch runs the FFN on [batch * seq, hidden]; TF keeps [batch, seq, hidden].
        return self._taps(model.decoder.layers, flat=True)

    @staticmethod
    def _taps(blocks: Any, flat: bool) -> dict[str, Tap]:
        taps = {}
        for i, block in enumerate(blocks):
            shape = block if flat else None
            if block.do_layer_norm_before:
                attention = Tap(block.final_layer_norm, "in", unflatten=shape)
            else:
                attention = Tap(block.self_attn_layer_norm)
            taps[f"layer_{i}.attention"] = attention
            taps[f"layer_{i}.intermediate"] = Tap(block.fc2, "in", unflatten=shape)
            taps[f"layer_{i}.output"] = Tap(block)
        return taps

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        decoder, block = main.decoder, _layer(main, i)
        # The causal + padding mask exactly as TF's decoder builds it (-1e8 additive).
        shape = (int(mask.shape[0]), int(mask.shape[1]))
        causal = decoder._prepare_decoder_attention_mask(mask, shape, 0)
        pre = block.do_layer_norm_before
        h = block.self_attn_layer_norm(x) if pre else x
        a = x + block.self_attn(hidden_states=h, attention_mask=causal, training=False)[0]
        pt_attn, pt_inter = pt(f"layer_{i}.attention"), pt(f"layer_{i}.intermediate")
        ffn_in = block.final_layer_norm(pt_attn) if pre else pt_attn
        out = pt_attn + block.fc2(pt_inter)
        return {
            "attention": a if pre else block.self_attn_layer_norm(a),
            "intermediate": block.activation_fn(block.fc1(ffn_in)),
            "output": out if pre else block.final_layer_norm(out),
        }

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            parts = ("embed_tokens.", "embed_positions.", "project_in.")
            return [f"decoder.{p}" for p in parts] if component == "embeddings" else []
        # final_layer_norm precedes fc1 (pre-LN) or follows fc2 (post-LN, 350m).
        parts = {
            "attention": ("self_attn_layer_norm.", "self_attn."),
            "intermediate": ("final_layer_norm.", "fc1."),
            "output": ("fc2.", "final_layer_norm."),
        }[component]
        return [f"decoder.layers.{layer}.{part}" for part in parts]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        block = _layer(main, i)
        if block.do_layer_norm_before:  # the FFN reads a normed input: no numeric hints
            return None
        return FeedForward(block.fc1, block.fc2, block.final_layer_norm, config.activation_function)


LAYER = "decoder.layers.{i}."
FAULTS: tuple[Fault, ...] = decoder_faults(
    Parts(
        query_bias=Part(LAYER + "self_attn.q_proj.bias", pt_name=LAYER + "self_attn.q_proj.bias"),
        attention_norm=Part(
            LAYER + "self_attn_layer_norm.gamma", pt_name=LAYER + "self_attn_layer_norm.weight"
        ),
        ffn_norm=Part(LAYER + "final_layer_norm.gamma", pt_name=LAYER + "final_layer_norm.weight"),
        activation=Setting(name="gelu instead of relu", field="activation_function", value="gelu"),
        output_bias=Part(LAYER + "fc2.bias", pt_name=LAYER + "fc2.bias"),
    )
)

ARCHITECTURES = (
    Architecture(
        model_type="opt",
        family="opt",
        **hf_classes("OPT", "ForCausalLM"),
        tiny=dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_dim=64,
            max_position_embeddings=64,
            word_embed_proj_dim=32,
            bos_token_id=2,
            eos_token_id=2,
        ),
        positions=Positions.ABSOLUTE,
        causal=True,
        embeddings=EmbeddingTables(position=None, token_type=None, layer_norm=None),
        # TFOPTForCausalLM's logits: embed_tokens in "linear" mode (no get_lm_head)
        lm_head=LMHead(
            "no transform, no bias: x @ embed_tokens.T (the final LayerNorm is in the body)",
            lambda m, tf: lambda h: m.model.decoder.embed_tokens(h, mode="linear"),
            tied_only="lm_head.weight",
        ),
        sublayers=OptLayout(),
        hint_fields=("activation_function", "do_layer_norm_before", "word_embed_proj_dim"),
        faults=FAULTS,
        ffn_weight="decoder.layers.{layer}.fc1.weight",
    ),
)
