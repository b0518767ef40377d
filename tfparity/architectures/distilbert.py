"""DistilBERT: ``transformer.layer[i]`` holds ``attention``, ``sa_layer_norm``, ``ffn``
(``lin1``, activation, ``lin2``) and ``output_layer_norm``; no token types. The
activation is a plain function in the FFN, so its output is read as ``lin2``'s input."""

from __future__ import annotations

from typing import Any

from .base import Architecture, EmbeddingTables, LMHead, Positions, hf_classes
from .faults import Fault, Part, Parts, Setting, encoder_faults
from .keras_hub_layouts import (
    KerasHubLayout,
    block_config,
    encoder_feed_forward,
    post_norm_encoder_taps,
    preset_fields,
)
from .sublayers import AlwaysApplies, FeedForward, Tap


def _block(main: Any, i: int) -> Any:
    return main.transformer.layer[i]


class DistilBertLayout(AlwaysApplies):
    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return self._taps(main.embeddings, main.transformer.layer)

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        return self._taps(model.embeddings, model.transformer.layer)

    @staticmethod
    def _taps(embeddings: Any, blocks: Any) -> dict[str, Tap]:
        taps = {"embeddings": Tap(embeddings)}
        for i, block in enumerate(blocks):
            taps[f"layer_{i}.attention"] = Tap(block.sa_layer_norm)
            taps[f"layer_{i}.intermediate"] = Tap(block.ffn.lin2, "in")
            taps[f"layer_{i}.output"] = Tap(block.output_layer_norm)
        return taps

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        block = _block(main, i)
        sa = block.attention(x, x, x, mask, None, False, training=False)[0]
        pt_attn = pt(f"layer_{i}.attention")
        return {
            "attention": block.sa_layer_norm(sa + x),
            "intermediate": block.ffn.activation(block.ffn.lin1(pt_attn)),
            "output": block.output_layer_norm(
                block.ffn.lin2(pt(f"layer_{i}.intermediate")) + pt_attn
            ),
        }

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return ["embeddings."] if component == "embeddings" else []
        block = f"transformer.layer.{layer}."
        return [
            block + part
            for part in {
                "attention": ("attention.", "sa_layer_norm."),
                "intermediate": ("ffn.lin1.",),
                "output": ("ffn.lin2.", "output_layer_norm."),
            }[component]
        ]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        block = _block(main, i)
        return FeedForward(
            block.ffn.lin1, block.ffn.lin2, block.output_layer_norm, config.activation
        )


BLOCK = "transformer.layer.{i}."
FAULTS: tuple[Fault, ...] = encoder_faults(
    Parts(
        query_bias=Part(BLOCK + "attention.q_lin.bias", pt_name="q_lin.bias"),
        attention_output_kernel=Part(BLOCK + "attention.out_lin.kernel"),
        intermediate_bias=Part(BLOCK + "ffn.lin1.bias", pt_name="lin1.bias"),
        activation=Setting(
            name="gelu_new instead of gelu",
            field="activation",
            value="gelu_new",
            hint="TF's matches gelu_new",
        ),
        output_bias=Part(BLOCK + "ffn.lin2.bias", pt_name="lin2.bias"),
        output_norm=Part(
            BLOCK + "output_layer_norm.gamma", pt_name="output_layer_norm.weight", layer=0
        ),
        position_table=Part("embeddings.position_embeddings", hint="shifted by"),
    )
)

ARCHITECTURES = (
    Architecture(
        model_type="distilbert",
        family="distilbert",
        **hf_classes("DistilBert"),
        tiny=dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64),
        positions=Positions.ABSOLUTE,
        embeddings=EmbeddingTables(token_type=None),
        lm_head=LMHead(
            "dense (H->H) + {act} + LayerNorm, then x @ word_embeddings.T + bias[vocab]",
            lambda m, tf: (
                lambda h: m.vocab_projector(m.vocab_layer_norm(m.act(m.vocab_transform(h))))
            ),
        ),
        sublayers=DistilBertLayout(),
        hint_fields=("activation", "dim", "hidden_dim", "n_heads", "sinusoidal_pos_embds"),
        faults=FAULTS,
        ffn_weight="transformer.layer.{layer}.ffn.lin1.weight",
        keras_hub=KerasHubLayout(
            backbone="DistilBertBackbone",
            block_taps=post_norm_encoder_taps,
            embeddings="embeddings_layer_norm",
            feed_forward=encoder_feed_forward,
            effective_config=block_config("activation", None),
            preset_config=preset_fields(
                {
                    "hidden_dim": "dim",
                    "intermediate_dim": "hidden_dim",
                    "num_layers": "n_layers",
                    "num_heads": "n_heads",
                }
            ),
        ),
    ),
)
