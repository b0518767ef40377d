"""Deliberately broken ports: the :class:`Fault` record, the primitives that break
weights, and the shared encoder and decoder catalogues each family instantiates with
its own :class:`Parts` (:mod:`tfparity.testing` is where users find the catalogues).

A parity check that says PASS wrongly is worse than none, so every check should be
seen failing on known faults. Each :class:`Fault` breaks a loaded model the way real
ports break (a dropped bias, a transposed kernel, the tanh GELU, another LayerNorm
epsilon, shifted position embeddings, wrong attention scaling) and says where the
cross-check must localise it (:class:`Expect`).

A family says where its parts are (:class:`Parts`: the query bias, the attention output
kernel, the FFN biases, the norms, the position table, the activation's config field,
...) and :func:`encoder_faults`/:func:`decoder_faults` make the catalogue: the same
faults, with the same expectations, wherever the family has the part. What a family
breaks that no other does it writes as explicit :class:`Fault` records beside.

The primitives take variables and layers by duck typing (``.numpy()``, ``.assign()``),
so the same ones break HF TF models and keras-hub backbones and nothing here imports a
framework.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np

from ..compare import factor_text
from .sublayers import COMPONENTS


@dataclass(frozen=True, kw_only=True)
class Expect:
    """Where the cross-check must localise a fault: its first divergence at
    ``hidden_state``/``layer``/``component``, with ``hint`` (a phrase) in its hint.
    Layer numbers assume 2 layers."""

    hidden_state: int | None
    layer: str | int
    component: str | None
    hint: str

    @classmethod
    def at(cls, *, layer: int | str, component: str, hint: str) -> Expect:
        """A fault in ``layer``: a number (first seen in the hidden state after it),
        "embeddings" (hidden state 0) or "pooler" (after every hidden state)."""
        if isinstance(layer, int):
            hidden_state: int | None = layer + 1
        else:
            hidden_state = 0 if layer == "embeddings" else None
        return cls(hidden_state=hidden_state, layer=layer, component=component, hint=hint)


@dataclass(frozen=True, kw_only=True)
class Fault:
    """``apply(model)`` returns the broken model (the same object for weight faults);
    ``expect`` says where the cross-check must find it."""

    name: str
    apply: Callable[[Any], Any]
    expect: Expect


# ----------------------------------------------------------------------------- roots


def main_layer(model: Any) -> Any:
    """The main layer of a TFModel's HF model (``model.bert``, ``model.transformer``)."""
    return getattr(model.model, model.model.base_model_prefix)


def in_place(change: Callable[[Any], None]) -> Callable[[Any], Any]:
    """A weight fault on an HF TF model: ``change`` gets the model's main layer and edits
    it."""

    def apply(model: Any) -> Any:
        change(main_layer(model))
        return model

    return apply


def on_backbone(change: Callable[[Any], None]) -> Callable[[Any], Any]:
    """A weight fault on a keras-hub model: ``change`` gets its backbone and edits it."""

    def apply(model: Any) -> Any:
        change(model.backbone)
        model.forget_compiled()
        return model

    return apply


def with_config(**changes: Any) -> Callable[[Any], Any]:
    """A config.json fault: the same weights in a model built from a changed config."""

    def apply(model: Any) -> Any:
        return model.rebuilt(changes)  # the adapter's: architectures import no adapters

    return apply


# ----------------------------------------------------------------------------- primitives


def _value(var: Any) -> np.ndarray:
    return np.asarray(var.numpy())


def zero(var: Any) -> None:
    var.assign(np.zeros_like(_value(var)))


def transpose(var: Any) -> None:
    """A square kernel transposed (a 3-D attention kernel as its 2-D matrix)."""
    value = _value(var)
    side = int(round(value.size**0.5))
    var.assign(value.reshape(side, side).T.reshape(value.shape))


def scale(var: Any, factor: float) -> None:
    var.assign(_value(var) * factor)


def roll_rows(var: Any) -> None:
    var.assign(np.roll(_value(var), 1, axis=0))


def reverse_rows(var: Any) -> None:
    var.assign(_value(var)[::-1].copy())


def set_epsilon(layer: Any, epsilon: float) -> None:
    layer.epsilon = epsilon


def find(root: Any, path: str) -> Any:
    """The object at a dotted ``path`` from ``root``: names are attributes, numbers
    indices (``encoder.layer.1.attention``)."""
    for step in path.split("."):
        root = root[int(step)] if step.isdigit() else getattr(root, step)
    return root


# ----------------------------------------------------------------------------- catalogues


@dataclass(frozen=True)
class Part:
    """Where a family keeps one part a shared fault breaks.

    ``path``: from the root (the HF main layer, or the keras-hub backbone), ``{i}``
    standing for the layer broken. ``pt_name``: the PyTorch name the expected hint gives
    (``{i}`` likewise; "": the hint names none, only what is wrong). ``name``, ``hint``
    and ``layer`` replace the shared fault's where the family's catalogue has always
    said it otherwise.
    """

    path: str
    _: KW_ONLY
    pt_name: str = ""
    name: str | None = None
    hint: str | None = None
    layer: int | None = None


@dataclass(frozen=True, kw_only=True)
class Setting:
    """A config field set to another value (the activation, a norm's epsilon); the
    expected hint is the field's name unless ``hint`` says otherwise."""

    name: str
    field: str
    value: Any
    hint: str | None = None


@dataclass(frozen=True, kw_only=True)
class Parts:
    """Where a family keeps the parts the shared catalogues break; None: it has no such
    part, or it is not broken there.

    ``root``: how a change reaches the model (:func:`in_place` for HF TF models,
    :func:`on_backbone` for keras-hub). ``shared``: one layer's weights serve every
    layer (ALBERT), so every weight fault shows at layer 0.
    """

    root: Callable[[Callable[[Any], None]], Callable[[Any], Any]] = in_place
    shared: bool = False
    # attention
    query_bias: Part | None = None
    attention_output_kernel: Part | None = None
    query_kernel: Part | None = None
    attention_norm: Part | None = None
    # the FFN
    ffn_norm: Part | None = None
    intermediate_bias: Part | None = None
    intermediate_kernel: Part | None = None
    activation: Setting | None = None
    output_bias: Part | None = None
    output_kernel: Part | None = None
    output_norm: Part | None = None
    # embeddings
    position_table: Part | None = None
    token_type_table: Part | None = None
    norm_epsilon: Setting | None = None


@dataclass(frozen=True)
class Breakage:
    """How a shared fault breaks its part (``change``), and the phrase the hint must
    then hold, given the part's PyTorch name (``hint(pt_name)``; "": none named)."""

    change: Callable[[Any], None]
    hint: Callable[[str], str]


def _zeros(pt_name: str) -> str:
    return f"{pt_name} is all zeros" if pt_name else "all zeros"


def scaled_by(factor: float) -> Breakage:
    def hint(pt_name: str) -> str:
        said = f"scaled by {factor_text(factor)}"
        return f"{pt_name} is PyTorch's {said}" if pt_name else said

    return Breakage(lambda var: scale(var, factor), hint)


ZEROED = Breakage(zero, _zeros)
TRANSPOSED = Breakage(transpose, lambda _: "transposed")
SHIFTED = Breakage(roll_rows, lambda _: "shifted")
REVERSED = Breakage(reverse_rows, lambda pt_name: pt_name)  # the hint names the table


@dataclass(frozen=True)
class Breaks:
    """A shared fault: ``breakage`` on the part ``slot`` of :class:`Parts`, in ``layer``
    (a number, or "embeddings"), where ``component`` must show it."""

    slot: str
    name: str
    breakage: Breakage
    layer: int | str
    component: str

    def fault(self, parts: Parts) -> Fault:
        part: Part = getattr(parts, self.slot)
        layer = self.layer if part.layer is None else part.layer
        i = 0 if parts.shared and isinstance(layer, int) else layer
        path, change = part.path.format(i=i), self.breakage.change
        hint = part.hint or self.breakage.hint(part.pt_name.format(i=i))
        return Fault(
            name=part.name or self.name,
            apply=parts.root(lambda root: change(find(root, path))),
            expect=Expect.at(layer=i, component=self.component, hint=hint),
        )


@dataclass(frozen=True)
class Sets:
    """A shared config fault: the :class:`Setting` in ``slot``, first seen in ``layer``
    at ``component`` (with the setting's hint)."""

    slot: str
    layer: int | str
    component: str

    def fault(self, parts: Parts) -> Fault:
        setting: Setting = getattr(parts, self.slot)
        return Fault(
            name=setting.name,
            apply=with_config(**{setting.field: setting.value}),
            expect=Expect.at(
                layer=self.layer, component=self.component, hint=setting.hint or setting.field
            ),
        )


# The shared catalogues, each fault as: the slot of Parts, its name (unless the family's
# Part names it otherwise), how it breaks, the layer and the component where the
# cross-check must find it. A catalogue lists a component's faults in this order.
_QUERY_BIAS = Breaks("query_bias", "zeroed attention query bias", ZEROED, 1, "attention")
_QUERY_KERNEL = Breaks("query_kernel", "scaled query kernel", scaled_by(1.1), 1, "attention")
_OUTPUT_KERNEL = Breaks(
    "attention_output_kernel", "transposed attention output kernel", TRANSPOSED, 0, "attention"
)
_UP_BIAS = Breaks("intermediate_bias", "dropped FFN up-projection bias", ZEROED, 0, "intermediate")
_ACTIVATION = Sets("activation", 0, "intermediate")
_DOWN_BIAS = Breaks("output_bias", "dropped FFN down-projection bias", ZEROED, 1, "output")
_POSITIONS = Breaks(
    "position_table", "shifted position embeddings", SHIFTED, "embeddings", "embeddings"
)

ENCODER: tuple[Breaks | Sets, ...] = (
    _QUERY_BIAS,
    _OUTPUT_KERNEL,
    _QUERY_KERNEL,
    Breaks(
        "attention_norm", "attention LayerNorm gamma off by 1%", scaled_by(1.01), 0, "attention"
    ),
    _UP_BIAS,
    _ACTIVATION,
    _DOWN_BIAS,
    Breaks("output_norm", "LayerNorm gamma off by 1%", scaled_by(1.01), 1, "output"),
    _POSITIONS,
    Breaks("token_type_table", "swapped token type rows", REVERSED, "embeddings", "embeddings"),
    # post-LayerNorm: the embedding LayerNorm is the first to use it
    Sets("norm_epsilon", "embeddings", "embeddings"),
)
DECODER: tuple[Breaks | Sets, ...] = (
    _QUERY_BIAS,
    _QUERY_KERNEL,
    _OUTPUT_KERNEL,
    Breaks(
        "attention_norm",
        "pre-attention LayerNorm gamma off by 1%",
        scaled_by(1.01),
        0,
        "attention",
    ),
    # pre-norm: the norm before layer 0's attention is the first to use it
    Sets("norm_epsilon", 0, "attention"),
    Breaks("ffn_norm", "pre-FFN LayerNorm gamma off by 1%", scaled_by(1.01), 0, "intermediate"),
    _UP_BIAS,
    Breaks("intermediate_kernel", "zeroed up-projection kernel", ZEROED, 1, "intermediate"),
    _ACTIVATION,
    _DOWN_BIAS,
    Breaks("output_kernel", "FFN down-projection off by 10%", scaled_by(1.1), 1, "output"),
    _POSITIONS,
)

_ORDER = (*COMPONENTS, "embeddings", "pooler")


def catalogue(
    shared: Sequence[Breaks | Sets], parts: Parts, extra: Sequence[Fault] = ()
) -> tuple[Fault, ...]:
    """The ``shared`` faults on the parts the family names, with its ``extra`` ones,
    ordered by component (attention, intermediate, output, embeddings, pooler)."""
    made = [s.fault(parts) for s in shared if getattr(parts, s.slot) is not None]
    return tuple(
        sorted([*made, *extra], key=lambda f: _ORDER.index(f.expect.component or "pooler"))
    )


def encoder_faults(parts: Parts, extra: Sequence[Fault] = ()) -> tuple[Fault, ...]:
    """The shared encoder catalogue (post-LayerNorm blocks) on a family's ``parts``."""
    return catalogue(ENCODER, parts, extra)


def decoder_faults(parts: Parts, extra: Sequence[Fault] = ()) -> tuple[Fault, ...]:
    """The shared decoder catalogue (pre-norm blocks) on a family's ``parts``."""
    return catalogue(DECODER, parts, extra)
