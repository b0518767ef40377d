"""BERT: post-LayerNorm encoder; ``encoder.layer[i]`` holds ``attention``,
``intermediate`` and ``output`` in both frameworks (TF names the last ``bert_output``).

Its sub-layer layout also serves RoBERTa, XLM-R, CamemBERT and ELECTRA (their modules
reuse :data:`LAYOUT`), and its fault catalogue is the default one.
"""

from __future__ import annotations

from typing import Any

from .base import Architecture, KnownDifference, LMHead, Positions, hf_classes
from .faults import Expect, Fault, Part, Parts, Setting, encoder_faults, in_place, zero
from .keras_hub_layouts import (
    ENCODER_FAULTS,
    HeadWeight,
    KerasHubHead,
    KerasHubLayout,
    encoder_config,
    encoder_feed_forward,
    post_norm_encoder_taps,
)
from .sublayers import AlwaysApplies, FeedForward, Tap, extended_mask

HINT_FIELDS = ("hidden_act", "layer_norm_eps", "type_vocab_size", "position_embedding_type")
# The config of a 2-layer, 32-wide encoder; other encoder families start from it.
TINY = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
)


class BertLayout(AlwaysApplies):
    """``encoder.layer[i]``: ``attention`` (self-attention + dense + residual +
    LayerNorm), ``intermediate`` (dense + activation), ``output`` (dense + residual +
    LayerNorm); ``embeddings`` and ``pooler`` on the main layer. Encoders of the same
    shape (MPNet, DeBERTa-v2, MobileBERT) subclass it, naming TF's FFN output layer."""

    TF_OUTPUT = "bert_output"  # what TF names the FFN output layer

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return self._taps(main, self.TF_OUTPUT)

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        return self._taps(model, "output")

    @staticmethod
    def _taps(main: Any, output: str) -> dict[str, Tap]:
        taps = {"embeddings": Tap(main.embeddings)}
        for i, layer in enumerate(main.encoder.layer):
            taps[f"layer_{i}.attention"] = Tap(layer.attention)
            taps[f"layer_{i}.intermediate"] = Tap(layer.intermediate)
            taps[f"layer_{i}.output"] = Tap(getattr(layer, output))
        if getattr(main, "pooler", None) is not None:
            taps["pooler"] = Tap(main.pooler)
        return taps

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Any) -> dict:
        layer = main.encoder.layer[i]
        attn = layer.attention(
            input_tensor=x,
            attention_mask=extended_mask(mask),
            head_mask=None,
            encoder_hidden_states=None,
            encoder_attention_mask=None,
            past_key_value=None,
            output_attentions=False,
            training=False,
        )[0]
        pt_attn = pt(f"layer_{i}.attention")
        inter = layer.intermediate(pt_attn)
        out = layer.bert_output(
            hidden_states=pt(f"layer_{i}.intermediate"), input_tensor=pt_attn, training=False
        )
        return {"attention": attn, "intermediate": inter, "output": out}

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return [f"{component}."] if component in ("embeddings", "pooler") else []
        return [f"encoder.layer.{layer}.{component}."]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        layer = main.encoder.layer[i]
        out = layer.bert_output
        return FeedForward(layer.intermediate.dense, out.dense, out.LayerNorm, config.hidden_act)


LAYOUT = BertLayout()
FFN_WEIGHT = "encoder.layer.{layer}.intermediate.dense.weight"


GELU_NEW = Setting(
    name="gelu_new instead of gelu", field="hidden_act", value="gelu_new", hint="gelu_new"
)
EPSILON = Setting(name="LayerNorm epsilon 1e-5 vs 1e-12", field="layer_norm_eps", value=1e-5)
LAYER = "encoder.layer.{i}."
PARTS = Parts(
    query_bias=Part(LAYER + "attention.self_attention.query.bias"),
    attention_output_kernel=Part(LAYER + "attention.dense_output.dense.kernel"),
    intermediate_bias=Part(LAYER + "intermediate.dense.bias", name="dropped intermediate bias"),
    activation=GELU_NEW,
    output_bias=Part(LAYER + "bert_output.dense.bias", name="dropped output bias"),
    output_norm=Part(LAYER + "bert_output.LayerNorm.gamma", pt_name="LayerNorm.weight"),
    position_table=Part("embeddings.position_embeddings"),
    token_type_table=Part("embeddings.token_type_embeddings", pt_name="token_type_embeddings"),
    norm_epsilon=EPSILON,
)


def _unscaled_attention(main: Any) -> None:
    main.encoder.layer[1].attention.self_attention.sqrt_att_head_size = 1.0


FAULTS: tuple[Fault, ...] = encoder_faults(
    PARTS,
    extra=(
        Fault(
            name="wrong attention scaling",
            apply=in_place(_unscaled_attention),
            expect=Expect.at(layer=1, component="attention", hint="computation"),
        ),
        Fault(
            name="zeroed pooler kernel",
            apply=in_place(lambda m: zero(m.pooler.dense.kernel)),
            expect=Expect.at(
                layer="pooler", component="pooler", hint="pooler.dense.weight is all zeros"
            ),
        ),
        Fault(
            name="zeroed pooler bias",
            apply=in_place(lambda m: zero(m.pooler.dense.bias)),
            expect=Expect.at(layer="pooler", component="pooler", hint="pooler"),
        ),
    ),
)

MLM_HEAD = LMHead(
    "dense (H->H) + {act} + LayerNorm, then x @ word_embeddings.T + bias[vocab]",
    lambda m, tf: m.mlm.predictions,
)

# keras-hub's BertBackbone builds its blocks with the tanh GELU whatever config.json
# says (hidden_act is not passed by convert_bert.py), and BERT checkpoints use the exact
# one: keras-hub:tiny:bert and keras-hub:minilm fail at layer 0, intermediate.
GELU_FINDING = KnownDifference(
    hidden_state=1,
    layer=0,
    component="intermediate",
    hint="config hidden_act: 'gelu_approximate' (TF) vs 'gelu' (PyTorch)",
    finding="keras-hub's BertBackbone hard-codes the tanh GELU (gelu_approximate); "
    "BERT checkpoints (config hidden_act='gelu') use the exact erf GELU, and "
    "convert_bert.py does not read hidden_act",
    # transformers' tanh GELU (torch's gelu(approximate="tanh")) is keras' approximate one
    reference_config={"hidden_act": "gelu_pytorch_tanh"},
)
# keras-hub's BERT tasks' heads as transformers' (keras-hub's converters port neither).
MLM_PREFIX = "cls.predictions."
KERAS_HUB_HEADS = (
    KerasHubHead(
        task="BertMaskedLM",
        kind="masked-lm",
        weights=(
            HeadWeight(
                "mlm_head/intermediate_dense/kernel", MLM_PREFIX + "transform.dense.weight", True
            ),
            HeadWeight("mlm_head/intermediate_dense/bias", MLM_PREFIX + "transform.dense.bias"),
            HeadWeight(
                "mlm_head/intermediate_layer_norm/gamma", MLM_PREFIX + "transform.LayerNorm.weight"
            ),
            HeadWeight(
                "mlm_head/intermediate_layer_norm/beta", MLM_PREFIX + "transform.LayerNorm.bias"
            ),
            HeadWeight("mlm_head/output_bias", MLM_PREFIX + "bias"),
            # the decoder: tied to the token embedding (reversed), its bias the head's
            HeadWeight("token_embedding/embeddings", MLM_PREFIX + "decoder.weight"),
            HeadWeight("mlm_head/output_bias", MLM_PREFIX + "decoder.bias"),
        ),
        differs="keras-hub's BertMaskedLM head (MaskedLMHead) normalises with LayerNorm "
        "epsilon 1e-5 and the exact GELU whatever the config says, where transformers' "
        "BertForMaskedLM uses layer_norm_eps (1e-12) and hidden_act: its logits differ by "
        "that (about 1e-4 relative on tiny:bert), at the head",
    ),
    KerasHubHead(
        task="BertTextClassifier",
        kind="sequence-classification",
        weights=(
            HeadWeight("logits/kernel", "classifier.weight", True),
            HeadWeight("logits/bias", "classifier.bias"),
        ),
    ),
)
KERAS_HUB = KerasHubLayout(
    backbone="BertBackbone",
    block_taps=post_norm_encoder_taps,
    embeddings="embeddings_layer_norm",
    pooler="pooled_dense",
    feed_forward=encoder_feed_forward,
    effective_config=encoder_config,
    faults=ENCODER_FAULTS,
    known_difference=GELU_FINDING,
    heads=KERAS_HUB_HEADS,
)

ARCHITECTURES = (
    Architecture(
        model_type="bert",
        family="bert",
        **hf_classes("Bert"),
        tiny=TINY,
        positions=Positions.ABSOLUTE,
        lm_head=MLM_HEAD,
        sublayers=LAYOUT,
        hint_fields=HINT_FIELDS,
        faults=FAULTS,
        ffn_weight=FFN_WEIGHT,
        keras_hub=KERAS_HUB,
    ),
)
