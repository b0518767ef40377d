"""An untied LM head that transformers' TF class cannot hold, named as the cause.

A GPT-2 checkpoint saved with ``tie_word_embeddings=false`` holds an ``lm_head.weight``
of its own. ``TFGPT2LMHeadModel`` has no such weight: its logits are always the product
with the word embeddings (the registry's ``LMHead.tied_only``). Loading drops the
checkpoint's head, so TF's logits differ from PyTorch's while every hidden state
agrees; without this module the load note called the weight "not part of the model
checked" and the hint blamed the computation.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...architectures import for_config
from ...results import Hint
from ..sources.holdings import Holdings


def tied_only_weight(config: Any, class_name: str) -> str | None:
    """The untied head weight this TF class cannot hold, where the config unties it
    (None: the class holds it, the config ties it, or the class has no LM head)."""
    head = for_config(config).lm_head
    name = head.tied_only if head is not None else None
    lm_class = class_name == for_config(config).tf_head_class
    untied = getattr(config, "tie_word_embeddings", True) is False
    return name if name is not None and lm_class and untied else None


def dropped_head(config: Any, class_name: str, holdings: Holdings) -> tuple[list[str], Holdings]:
    """The load note naming the dropped head weight, and ``holdings`` without it among
    the unused weights (so the generic "not part of the model checked" note skips it)."""
    name = tied_only_weight(config, class_name)
    if name is None or name not in holdings.unused:
        return [], holdings
    note = (
        f"The checkpoint's {name} (an untied LM head: tie_word_embeddings=false) was "
        f"dropped: {class_name} cannot hold an untied head (its logits are the product "
        "with the word embeddings), so TF's logits are not the checkpoint's."
    )
    rest = tuple(n for n in holdings.unused if n != name)
    return [note], replace(holdings, unused=rest)


def untied_head_hints(
    config: Any, class_name: str, word_embeddings: np.ndarray, pt_weights: dict[str, np.ndarray]
) -> list[Hint]:
    """The hint for a divergence at the head: the reference's own head weight, which
    differs from the word embeddings TF multiplies by instead (none where it equals them:
    then tying loses nothing)."""
    name = tied_only_weight(config, class_name)
    head = pt_weights.get(name) if name is not None else None
    if head is None:
        return []
    if head.shape == word_embeddings.shape:
        diff = float(np.max(np.abs(head - word_embeddings)))
        if diff == 0.0:
            return []
        differs = f"differs from the word embeddings by up to {diff:.3g}"
    else:
        differs = f"has shape {head.shape}, the word embeddings {word_embeddings.shape}"
    text = (
        f"{name}: the checkpoint's own LM head (tie_word_embeddings=false) {differs}; "
        f"{class_name} cannot hold an untied head (its logits are the product with the "
        f"word embeddings), so it dropped {name} and its logits differ"
    )
    return [Hint("unported", text, weight=name)]
