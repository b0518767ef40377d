"""Broken ports on purpose: the fault catalogues and the perturbed-port check's fault.

A parity check that says PASS wrongly is worse than none, so every check should be seen
failing on known faults. Each architecture's catalogue lives in its registry module
(:mod:`tfparity.architectures`); this is where tests, scripts and users find them.

    from tfparity.testing import by_name
    broken = by_name("dropped output bias").apply(TFModel.load("tiny:bert"))
"""

from __future__ import annotations

from typing import Any

from .architectures import Fault, lookup
from .architectures.bert import FAULTS as CATALOGUE
from .architectures.bert import LAYOUT as BERT_LAYOUT
from .architectures.faults import Expect, scale, with_config
from .architectures.generation_faults import CACHE_FAULTS, CacheFault
from .errors import TfparityError

__all__ = [
    "CACHE_FAULTS",
    "CATALOGUE",
    "CacheFault",
    "Expect",
    "Fault",
    "by_name",
    "catalogue_for",
    "ffn_fault",
    "perturb_ffn",
    "with_config",
]


def catalogue_for(model_type: str) -> tuple[Fault, ...]:
    """The faults written for ``model_type``'s module layout: its own, else BERT's where
    it shares BERT's layers (RoBERTa, ELECTRA), else none."""
    arch = lookup(model_type)
    if arch.faults:
        return arch.faults
    return CATALOGUE if arch.sublayers is BERT_LAYOUT else ()


def by_name(name: str, model_type: str = "bert") -> Fault:
    return next(f for f in catalogue_for(model_type) if f.name == name)


def perturb_ffn(model: Any, layer: int = 1, factor: float = 1.1) -> str:
    """Scale one FFN weight of ``layer`` in ``model`` (a TFModel) by ``factor``, in
    place; returns the weight's PyTorch name.

    The architecture names the weight (``ffn_weight``); the TF variable is found by
    transformers' own TF->PyTorch name mapping, so the same rule serves every family.
    """
    from .adapters.weight_names import tf_weights_by_pt_name

    pattern = model.architecture.ffn_weight
    if pattern is None:
        raise TfparityError(f"No FFN weight is named for {model.model_type}.")
    name = pattern.format(layer=layer)
    weights = tf_weights_by_pt_name(model.model)
    if name not in weights:
        raise TfparityError(f"{model.model_type} has no weight {name} (layout changed?).")
    variable = weights[name].variable
    scale(variable, factor)
    return name


def ffn_fault(model_type: str, layer: int = 1, factor: float = 1.1) -> Fault:
    """The perturbed-port fault: one FFN weight of ``layer`` scaled by ``factor``.

    It must fail at hidden state ``layer + 1`` (layer 0 where every layer shares one
    layer's weights), localised to that layer, and the hint must name the scale.
    """
    arch = lookup(model_type)
    first = 0 if arch.shared_layers else layer

    def apply(model: Any) -> Any:
        perturb_ffn(model, layer, factor)
        return model

    return Fault(
        name=f"FFN weight of layer {layer} scaled by {factor:g}",
        apply=apply,
        expect=Expect(
            hidden_state=first + 1,
            layer=first,
            component="intermediate" if arch.sublayers is not None else None,
            hint=f"scaled by {factor:.4g}",
        ),
    )
