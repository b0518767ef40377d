"""Llama: a causal, pre-RMSNorm decoder with rotary positions, grouped-query attention
and a gated (SwiGLU) FFN. transformers has no TF class for it: its TF/Keras port is
keras-hub's ``Llama3Backbone`` (``keras-hub:tiny:llama``), and ``tiny:llama`` is seeded
in PyTorch. Qwen, Qwen3 and Mistral's keras-hub ports share this layout.

The PyTorch layout (:class:`GatedDecoderLayout`) taps ``layers[i]``: the residual sum
after attention (``post_attention_layernorm``'s input), the gated product
(``mlp.down_proj``'s input) and the layer's output.
"""

from __future__ import annotations

from typing import Any

from ..errors import TfparityError
from .base import Architecture, EmbeddingTables, KnownDifference, Positions
from .faults import Expect, Fault, Part, decoder_faults, on_backbone, set_epsilon
from .keras_hub_layouts import (
    BLOCK,
    KerasHubLayout,
    backbone_parts,
    block,
    decoder_config,
    gated_decoder_taps,
)
from .sublayers import AlwaysApplies, FeedForward, Tap, decoder_taps, layer_taps

HINT_FIELDS = (
    "hidden_act",
    "rms_norm_eps",
    "rope_theta",
    "sliding_window",
    "num_key_value_heads",
    "head_dim",
)
DECODER_TINY = dict(  # a tiny Llama-style decoder (Mistral's too)
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    intermediate_size=64,
    max_position_embeddings=64,
    bos_token_id=0,
    eos_token_id=2,
)
TINY = {**DECODER_TINY, "tie_word_embeddings": False}
DECODER_TABLES = EmbeddingTables(
    word="embed_tokens", position=None, token_type=None, layer_norm=None
)


class GatedDecoderLayout(AlwaysApplies):
    """``layers[i]`` of a Llama-style model (Llama, Qwen, Gemma: PyTorch only; Mistral
    adds its HF TF side): ``attention`` is ``post_attention_layernorm``'s input (the
    first residual sum), ``intermediate`` ``mlp.down_proj``'s input (``act(gate) *
    up``), ``output`` the block's output."""

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        raise TfparityError("transformers has no TensorFlow model for this architecture.")

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        return layer_taps(model.layers, self.block_taps)

    @staticmethod
    def block_taps(layer: Any) -> dict[str, Tap]:
        return decoder_taps(layer, Tap(layer.post_attention_layernorm, "in"), layer.mlp.down_proj)

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        raise TfparityError("transformers has no TensorFlow model for this architecture.")

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return ["embed_tokens."] if component == "embeddings" else []
        parts = {
            "attention": ("input_layernorm.", "self_attn."),
            "intermediate": ("post_attention_layernorm.", "mlp.gate_proj.", "mlp.up_proj."),
            "output": ("mlp.down_proj.",),
        }[component]
        return [f"layers.{layer}.{part}" for part in parts]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        return None


LAYOUT = GatedDecoderLayout()
FFN_WEIGHT = "layers.{layer}.mlp.up_proj.weight"


# keras-hub's Llama-style decoder blocks: the shared decoder catalogue on the backbone.
KERAS_HUB_PARTS = backbone_parts(
    query_kernel=Part(BLOCK + "_self_attention_layer._query_dense.kernel"),
    attention_output_kernel=Part(BLOCK + "_self_attention_layer._output_dense.kernel"),
    intermediate_kernel=Part(BLOCK + "_feedforward_intermediate_dense.kernel"),
)
KERAS_HUB_FAULTS: tuple[Fault, ...] = decoder_faults(
    KERAS_HUB_PARTS,
    extra=(
        Fault(
            name="RMSNorm epsilon 1e-2",
            apply=on_backbone(lambda b: set_epsilon(block(b, 0)._self_attention_layernorm, 1e-2)),
            expect=Expect.at(layer=0, component="attention", hint="computation"),
        ),
    ),
)


LLAMA_EPS = KnownDifference(
    hidden_state=1,
    layer=0,
    component="attention",
    hint="config rms_norm_eps: 1e-06 (TF) vs 1e-05 (PyTorch)",
    finding="keras-hub's Llama converter (convert_llama3.py) does not pass rms_norm_eps "
    "to Llama3Backbone, which then uses its default 1e-6; Llama 2/3 checkpoints use 1e-5",
    reference_config={"rms_norm_eps": 1e-6},  # every RMSNorm of both then uses 1e-6
)


def keras_hub_decoder(backbone: str, **fields: Any) -> KerasHubLayout:
    """keras-hub's port of a Llama-style decoder: gated blocks, a final RMSNorm, the
    config as the backbone runs it; ``fields`` override (taps, faults, findings)."""
    defaults = dict(
        block_taps=gated_decoder_taps,
        final_norm="sequence_output_layernorm",
        effective_config=decoder_config,
    )
    return KerasHubLayout(backbone=backbone, **{**defaults, **fields})


def pytorch_only_decoder(
    model_type: str,
    pt_class: str,
    pt_head_class: str,
    *,
    tiny: dict[str, Any],
    keras_hub: KerasHubLayout,
    hint_fields: tuple[str, ...] = HINT_FIELDS,
) -> Architecture:
    """A Llama-style decoder with no transformers TF class (Llama, Qwen, Qwen3, Gemma):
    seeded in PyTorch, its TF side is keras-hub's port."""
    return Architecture(
        model_type=model_type,
        family=model_type,
        tf_class=None,
        pt_class=pt_class,
        pt_head_class=pt_head_class,
        tiny={**TINY, **tiny},
        positions=Positions.ROTARY,
        causal=True,
        embeddings=DECODER_TABLES,
        sublayers=LAYOUT,
        hint_fields=hint_fields,
        ffn_weight=FFN_WEIGHT,
        keras_hub=keras_hub,
    )


ARCHITECTURES = (
    pytorch_only_decoder(
        "llama",
        "LlamaModel",
        "LlamaForCausalLM",
        tiny={"rms_norm_eps": 1e-5},  # Llama 2 and 3 checkpoints use 1e-5
        keras_hub=keras_hub_decoder(
            "Llama3Backbone", faults=KERAS_HUB_FAULTS, known_difference=LLAMA_EPS
        ),
    ),
)
