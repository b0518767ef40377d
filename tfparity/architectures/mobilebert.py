"""MobileBERT: narrow bottleneck blocks (``true_hidden_size``) inside a wide body, with
stacked FFNs, ``no_norm`` (an elementwise affine) instead of LayerNorm, and a trigram
embedding projection."""

from __future__ import annotations

from .base import Architecture, Positions
from .bert import TINY

ARCHITECTURES = (
    Architecture(
        model_type="mobilebert",
        family="mobilebert",
        tf_class="TFMobileBertModel",
        pt_class="MobileBertModel",
        tf_head_class="TFMobileBertForMaskedLM",
        pt_head_class="MobileBertForMaskedLM",
        tiny={
            **TINY,
            "embedding_size": 16,
            "intra_bottleneck_size": 16,
            "true_hidden_size": 16,
            "num_feedforward_networks": 2,
        },
        positions=Positions.ABSOLUTE,
        hint_fields=(
            "hidden_act",
            "normalization_type",
            "layer_norm_eps",
            "use_bottleneck",
            "key_query_shared_bottleneck",
            "num_feedforward_networks",
            "trigram_input",
        ),
        ffn_weight="encoder.layer.{layer}.intermediate.dense.weight",
    ),
)
