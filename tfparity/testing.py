"""Broken ports on purpose: the fault catalogues and the perturbed-port check's fault.

A parity check that says PASS wrongly is worse than none, so every check should be seen
failing on known faults. Each architecture's catalogue lives in its registry module
(:mod:`tfparity.architectures`); this is where tests, scripts and users find them.

    from tfparity.testing import by_name
    broken = by_name("dropped output bias").apply(TFModel.load("tiny:bert"))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .architectures import Fault, lookup
from .architectures.bert import FAULTS as CATALOGUE
from .architectures.bert import LAYOUT as BERT_LAYOUT
from .architectures.faults import Expect, scale, with_config
from .architectures.generation_faults import CACHE_FAULTS, CacheFault
from .compare import factor_text
from .errors import TfparityError

__all__ = [
    "CACHE_FAULTS",
    "CATALOGUE",
    "CacheFault",
    "Expect",
    "Fault",
    "by_name",
    "catalogue_for",
    "export_saved_model",
    "ffn_fault",
    "gradient_faults",
    "perturb_ffn",
    "broken_kernel_set",
    "broken_onnx_kernel_set",
    "to_litert",
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
    from .adapters.hf_tf.weight_names import tf_weights_by_pt_name

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


def broken_kernel_set(op: str = "SOFTMAX", option: str = "beta", value: float = 1.05) -> Any:
    """A LiteRT kernel set (for ``tfparity runtimes``) that runs the reference kernels
    but the first ``op`` with ``option`` set to ``value`` (default: a softmax whose
    logits are scaled by 1.05): a broken kernel path, which the check must name with
    that op's tensor. Register it for a test with ``monkeypatch.setitem(KERNEL_SETS,
    "litert", replace(KERNEL_SETS["litert"], sets=(*sets, broken_kernel_set())))``."""
    from .adapters.exported.litert_kernels import RewrittenOp
    from .adapters.runtime.kernel_sets import KernelSet

    what = f"the reference kernels, but the first {op} with {option}={value} (a test's)"
    return KernelSet("broken", what, False, RewrittenOp("BUILTIN_REF", None, op, option, value))


def broken_onnx_kernel_set(op: str = "Softmax", factor: float = 1.05) -> Any:
    """An ONNX kernel set (for ``tfparity runtimes``) that runs the graph unoptimised
    but the first ``op`` node on its first input times ``factor`` (default: a softmax
    whose logits are scaled by 1.05, as :func:`broken_kernel_set` for LiteRT). Register
    it with ``monkeypatch.setitem(KERNEL_SETS, "onnx", replace(KERNEL_SETS["onnx"],
    sets=(*sets, broken_onnx_kernel_set())))``."""
    from .adapters.onnx.kernels import ScaledInput
    from .adapters.runtime.kernel_sets import KernelSet

    what = f"graph optimisation off, but the first {op} on its input x {factor} (a test's)"
    return KernelSet("broken", what, False, ScaledInput("ORT_DISABLE_ALL", op, factor))


def to_litert(tf_model: Any, path: Any, **options: Any) -> Any:
    """``tf_model`` (a TFModel, faults applied or not) written as a LiteRT flatbuffer at
    ``path``, as a user ships one (see :func:`tfparity.adapters.exported.litert_convert.
    to_litert` for ``quantisation``, ``batch``, ``seq`` and ``hidden_states``)."""
    from .adapters.exported.litert_convert import to_litert as convert

    return convert(tf_model, path, **options)


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
        name=f"FFN weight of layer {layer} scaled by {factor_text(factor)}",
        apply=apply,
        expect=Expect(
            hidden_state=first + 1,
            layer=first,
            component="intermediate" if arch.sublayers is not None else None,
            hint=f"scaled by {factor_text(factor)}",
        ),
    )


def export_saved_model(tf_model: Any, directory: str | Path, **options: Any) -> Path:
    """Write ``tf_model`` (a TFModel, faults applied or not) as a SavedModel with a
    ``serving_default`` signature, an export to check or to convert further (LiteRT); see
    :func:`tfparity.adapters.exported.writer.export_saved_model` for ``hidden_states``,
    ``inputs_embeds``, ``mask`` and ``unmasked``."""
    from .adapters.exported.writer import export_saved_model as write

    return write(tf_model, directory, **options)


def gradient_faults(layer_path: str = "encoder.layer.{i}") -> dict[str, tuple[Fault, ...]]:
    """Faults only gradients show, by the gradients report that must catch them
    (``gradients-embeds``: ids vs embeds; ``gradients``: TF vs PyTorch), with a port's
    forward fault for contrast. ``layer_path``: where an HF TF model's main layer keeps
    its layers (BERT's; ``h.{i}`` for GPT-2), for the backward-only layer fault.

    The gather faults leave the embeddings as they are (the embeds check passes) and
    stop or scale the gradient that flows back through them to the word-embedding
    matrix; the backward fault scales the gradient into a layer's input, its outputs
    unchanged (a wrong custom gradient)."""
    from .architectures.faults import find, main_layer

    def gather(factor: float) -> Any:
        def apply(model: Any) -> Any:
            from .adapters.tf_common.gradient_faults import with_gather_gradient

            return with_gather_gradient(model, factor)

        return apply

    def backward(model: Any) -> Any:
        from .adapters.tf_common.gradient_faults import with_layer_backward

        with_layer_backward(find(main_layer(model), layer_path.format(i=1)), 0.5)
        return model

    def forward(model: Any) -> Any:
        perturb_ffn(model, 1, 1.1)
        return model

    at_gather = dict(hidden_state=None, layer="embeddings", component="embeddings")
    return {
        "gradients-embeds": (
            Fault(
                name="gather gradient stopped",
                apply=gather(0.0),
                expect=Expect(**at_gather, hint="stopped"),
            ),
            Fault(
                name="gather gradient scaled by 0.5",
                apply=gather(0.5),
                expect=Expect(**at_gather, hint="scaled by 0.5"),
            ),
        ),
        "gradients": (
            Fault(
                name="layer 1 backward scaled by 0.5",
                apply=backward,
                expect=Expect(hidden_state=1, layer=1, component=None, hint="backward pass"),
            ),
            Fault(
                name="FFN weight of layer 1 scaled by 1.1",
                apply=forward,
                expect=Expect(hidden_state=2, layer=1, component=None, hint="forward pass"),
            ),
        ),
    }


def quantised_ffn_scale(model: Any, block: int) -> str:
    """The path of keras-hub block ``block``'s feed-forward output ``kernel_scale`` in a
    Keras-quantised ``model`` (``transformer_layer_1/feedforward_output_dense/kernel_scale``;
    the names differ a little by family)."""
    found = [
        v.path
        for v in model.weights
        if v.path.startswith(f"transformer_layer_{block}/")
        and "feedforward" in v.path
        and "output" in v.path
        and v.path.endswith("kernel_scale")
    ]
    if not found:
        raise ValueError(f"no quantised feed-forward output kernel_scale in block {block}")
    return found[0]


def scale_variable(model: Any, path: str, factor: float) -> None:
    """Multiply ``model``'s variable ``path`` by ``factor`` in place (a damaged scale)."""
    (variable,) = [v for v in model.weights if v.path == path]
    variable.assign(variable.numpy() * factor)


def damage_quantised_copies(monkeypatch: Any, block: int, factor: float) -> None:
    """Make every copy ``--quantize`` and ``--attribute`` quantise (through
    :func:`tfparity.adapters.keras_hub.quantised_side.quantised_side`) have block
    ``block``'s feed-forward output ``kernel_scale`` multiplied by ``factor``, as a
    faulty quantiser or a damaged file would: for tests that the damage is caught.
    ``monkeypatch`` is pytest's fixture (undone after the test)."""
    from .adapters.keras_hub import quantised_side as module

    real = module.quantised_side

    def damaged(side: Any, mode: str, layers: Any = None) -> Any:
        copy = real(side, mode, layers)
        try:
            path = quantised_ffn_scale(copy.model, block)
        except ValueError:  # a copy with only other layers quantised (--attribute)
            return copy
        scale_variable(copy.model, path, factor)
        return copy

    monkeypatch.setattr(module, "quantised_side", damaged)
