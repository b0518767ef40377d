"""RoBERTa and its relatives (XLM-R, CamemBERT, RoBERTa-PreLayerNorm): BERT's layers
with padding-aware positions.

Position ids made from ``input_ids`` count from ``padding_idx + 1`` and give padding
the padding index; made from ``inputs_embeds`` they are sequential from
``padding_idx + 1``. With left padding the two paths legitimately differ (the embeds
check says so). TF RoBERTa hard-codes ``padding_idx = 1``, so the position table needs
two rows more than the longest sequence.
"""

from __future__ import annotations

from dataclasses import replace

from .base import Architecture, KnownDifference, LMHead, Positions, hf_classes
from .bert import FFN_WEIGHT, HINT_FIELDS, LAYOUT, TINY
from .keras_hub_layouts import (
    KerasHubLayout,
    encoder_config,
    encoder_feed_forward,
    post_norm_encoder_taps,
    preset_fields,
)

TINY_ROBERTA = {
    **TINY,
    "max_position_embeddings": TINY["max_position_embeddings"] + 2,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "type_vocab_size": 1,
}
LM_HEAD = LMHead(
    "dense (H->H) + gelu + LayerNorm, then x @ word_embeddings.T + bias[vocab]",
    lambda m, tf: m.lm_head,
)

ROBERTA = Architecture(
    model_type="roberta",
    family="roberta",
    **hf_classes("Roberta"),
    tiny=TINY_ROBERTA,
    positions=Positions.PADDING_AWARE,
    lm_head=LM_HEAD,
    sublayers=LAYOUT,
    hint_fields=HINT_FIELDS,
    ffn_weight=FFN_WEIGHT,
    keras_hub=KerasHubLayout(
        backbone="RobertaBackbone",
        block_taps=post_norm_encoder_taps,
        embeddings="embeddings_layer_norm",
        feed_forward=encoder_feed_forward,
        effective_config=encoder_config,
        # HF's position table holds 2 rows before the first position (the pad offset).
        preset_config=preset_fields(max_position_embeddings=lambda n: n + 2),
        known_difference=KnownDifference(
            hidden_state=0,
            layer="embeddings",
            component="embeddings",
            hint="token_type_embeddings.weight is not ported by keras-hub's converter",
            finding="convert_roberta.py never ports embeddings.token_type_embeddings.weight "
            "(RobertaBackbone has no segment embedding), so HF's type-0 row, added to every "
            "token, is lost; convert_xlm_roberta.py folds it into the position table. Also "
            "RobertaBackbone hard-codes LayerNorm epsilon 1e-5 (right for roberta-base, "
            "config.json's layer_norm_eps is not read)",
        ),
    ),
)

ARCHITECTURES = (
    ROBERTA,
    replace(
        ROBERTA,
        model_type="xlm-roberta",
        **hf_classes("XLMRoberta"),
        keras_hub=replace(
            ROBERTA.keras_hub,
            backbone="XLMRobertaBackbone",
            known_difference=KnownDifference(
                hidden_state=0,
                layer="embeddings",
                component="embeddings",
                hint="config layer_norm_eps: 1e-05 (TF) vs 1e-12 (PyTorch)",
                finding="XLMRobertaBackbone hard-codes LayerNorm epsilon 1e-5 and the "
                "converter does not read layer_norm_eps (the tiny config's is 1e-12; real "
                "XLM-R checkpoints use 1e-5, where they agree)",
                reference_config={"layer_norm_eps": 1e-5},
            ),
        ),
    ),
    replace(
        ROBERTA,
        model_type="camembert",
        keras_hub=None,  # keras-hub has no converter for it
        **hf_classes("Camembert"),
    ),
    # Pre-LayerNorm blocks: BERT's sub-layer taps would read pre-norm values, so this
    # one is localised to the layer.
    replace(
        ROBERTA,
        model_type="roberta-prelayernorm",
        keras_hub=None,  # keras-hub has no converter for it
        **hf_classes("RobertaPreLayerNorm"),
        sublayers=None,
    ),
)
