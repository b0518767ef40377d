"""DeBERTa-v2/v3: DeBERTa's disentangled attention with log-bucketed relative
positions, a shared key projection and normalised relative embeddings (the v3
settings).

``encoder.layer[i]`` is BERT's post-LayerNorm layout (TF names the FFN output layer
``bert_output``). Attention also reads the encoder's relative positions
(``get_rel_pos``), its relative embeddings (``rel_embeddings``, LayerNorm-ed by the
encoder's ``LayerNorm`` under ``norm_rel_ebd="layer_norm"``) and a ``[b, 1, s, s]``
0/1 mask (``get_attention_mask``): isolation asks the encoder for all three, as its
own ``call`` does, and attention weight hints include the shared relative tables.
The convolution some v2 checkpoints add after layer 0 (``conv_kernel_size > 0``) has
no tap, so those configs are localised to the layer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .base import Architecture, EmbeddingTables, Positions, Renamed, hf_classes
from .bert import EPSILON, FFN_WEIGHT, GELU_NEW, BertLayout
from .deberta import HINT_FIELDS, TINY_DEBERTA
from .faults import Expect, Fault, Part, Parts, encoder_faults, in_place, roll_rows
from .sublayers import FeedForward

SHARED_ATTENTION = ("encoder.rel_embeddings.", "encoder.LayerNorm.")


def _layer(main: Any, i: int) -> Any:
    return main.encoder.layer[i]


class DebertaV2Layout(BertLayout):
    def applies(self, config: Any) -> bool:
        return not getattr(config, "conv_kernel_size", 0)

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        encoder, layer = main.encoder, _layer(main, i)
        attn = layer.attention(
            input_tensor=x,
            attention_mask=encoder.get_attention_mask(mask),
            query_states=None,
            relative_pos=encoder.get_rel_pos(x),
            rel_embeddings=encoder.get_rel_embedding(),
            output_attentions=False,
            training=False,
        )[0]
        pt_attn = pt(f"layer_{i}.attention")
        inter = layer.intermediate(hidden_states=pt_attn)
        out = layer.bert_output(
            hidden_states=pt(f"layer_{i}.intermediate"), input_tensor=pt_attn, training=False
        )
        return {"attention": attn, "intermediate": inter, "output": out}

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return ["embeddings."] if component == "embeddings" else []
        shared = list(SHARED_ATTENTION) if component == "attention" else []
        return [f"encoder.layer.{layer}.{component}.", *shared]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        layer = _layer(main, i)
        out = layer.bert_output
        return FeedForward(layer.intermediate.dense, out.dense, out.LayerNorm, config.hidden_act)


LAYER = "encoder.layer.{i}."
FAULTS: tuple[Fault, ...] = encoder_faults(
    Parts(
        query_bias=Part(
            LAYER + "attention.self.query_proj.bias",
            pt_name=LAYER + "attention.self.query_proj.bias",
        ),
        attention_norm=Part(
            LAYER + "attention.dense_output.LayerNorm.gamma",
            pt_name=LAYER + "attention.output.LayerNorm.weight",
        ),
        activation=GELU_NEW,
        output_bias=Part(LAYER + "bert_output.dense.bias", pt_name=LAYER + "output.dense.bias"),
        norm_epsilon=replace(EPSILON, name="LayerNorm epsilon 1e-5 vs 1e-7"),
    ),
    extra=(
        Fault(
            name="shifted relative embeddings",
            apply=in_place(lambda m: roll_rows(m.encoder.rel_embeddings)),
            expect=Expect.at(layer=0, component="attention", hint="encoder.rel_embeddings.weight"),
        ),
    ),
)

# With share_att_key=false each attention layer projects the relative embeddings with
# projections of its own; transformers' TF class names them pos_proj and pos_q_proj
# (Dense layer names), its PyTorch class pos_key_proj and pos_query_proj, so a PyTorch
# checkpoint's projections do not load into TF, which keeps random ones.
UNSHARED = "share_att_key=false"
RENAMED = (
    Renamed("pos_key_proj", "pos_proj", f"the relative positions' key projection ({UNSHARED})"),
    Renamed(
        "pos_query_proj", "pos_q_proj", f"the relative positions' query projection ({UNSHARED})"
    ),
)

ARCHITECTURES = (
    Architecture(
        model_type="deberta-v2",
        family="deberta-v2",
        **hf_classes("DebertaV2"),
        tiny={
            **TINY_DEBERTA,
            "position_buckets": 16,
            "norm_rel_ebd": "layer_norm",
            "share_att_key": True,
        },
        positions=Positions.RELATIVE,
        embeddings=EmbeddingTables(position=None, token_type=None),
        sublayers=DebertaV2Layout(),
        hint_fields=(*HINT_FIELDS, "position_buckets", "norm_rel_ebd", "share_att_key"),
        faults=FAULTS,
        ffn_weight=FFN_WEIGHT,
        tf_renamed=RENAMED,
    ),
)
