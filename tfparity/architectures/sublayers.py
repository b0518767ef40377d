"""The contract of a sub-layer layout: where a family keeps its blocks' parts, in TF and
in PyTorch, so the cross-check can tap, isolate and hint at component depth.

Every layout maps its blocks onto the same tap names: ``layer_{i}.attention``
(self-attention + residual + norm), ``layer_{i}.intermediate`` (FFN up-projection +
activation), ``layer_{i}.output`` (FFN down-projection + residual + norm), and
``embeddings``/``pooler`` where the model has them. A :class:`Tap` names the layer whose
output (or input) is that value: where the activation is a plain function inside the
FFN, its output is read as the input of the down-projection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

COMPONENTS = ("attention", "intermediate", "output")


@dataclass(frozen=True)
class Tap:
    """``layer``'s output (``side="out"``) or first input (``side="in"``). A ``shared``
    layer runs once per model layer (ALBERT): its tap is named by the component alone
    and each call is recorded as ``layer_{call}.{component}``. ``unflatten``: a module
    whose first input has this value's leading ``[batch, seq]`` where the model flattens
    them (PyTorch's OPT FFN runs on ``[batch * seq, ...]``): the value is recorded
    unflattened, as the other framework has it."""

    layer: Any
    side: str = "out"
    shared: bool = False
    unflatten: Any = None


@dataclass(frozen=True)
class FeedForward:
    """The TF layers around a block's activation: up-projection, down-projection, the
    norm after the residual (None for pre-norm blocks), and the activation's name."""

    up: Any
    down: Any
    norm: Any
    activation: str


class SubLayers(Protocol):
    """What a family provides for component-depth localisation."""

    def applies(self, config: Any) -> bool:
        """Whether this config has the layout described (ALBERT: one shared group)."""
        ...

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        """Taps in the TF main layer (``model.<base_model_prefix>``)."""
        ...

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        """Taps in the PyTorch base model."""
        ...

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Callable) -> dict:
        """Layer ``i``'s sub-layers on PyTorch's inputs: ``x`` is PyTorch's input to the
        block, ``mask`` ``[batch, seq]`` in the compute dtype, ``pt(name)`` a PyTorch tap
        as a tensor of that dtype. Returns TF outputs by component."""
        ...

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        """PyTorch parameter-name prefixes of a component (for weight hints)."""
        ...

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        """The dense layers and norm around layer ``i``'s activation (numeric hints), or
        None where the layout gives none."""
        ...


class AlwaysApplies:
    """Mixin: a layout that every config of its model types has."""

    def applies(self, config: Any) -> bool:
        return True


def layer_taps(blocks: Any, block_taps: Callable[[Any], dict[str, Tap]]) -> dict[str, Tap]:
    """Every block's taps under the names all layouts give them, ``layer_{i}.{component}``;
    ``block_taps(block)`` gives one block's by component."""
    return {
        f"layer_{i}.{component}": tap
        for i, block in enumerate(blocks)
        for component, tap in block_taps(block).items()
    }


def decoder_taps(block: Any, attention: Tap, down: Any) -> dict[str, Tap]:
    """A decoder block's taps: ``attention`` (the first residual sum, or the norm of it),
    the activation as the down-projection ``down``'s input, and the block's output."""
    return {"attention": attention, "intermediate": Tap(down, "in"), "output": Tap(block)}


class SameBlocks(AlwaysApplies):
    """Mixin: a layout whose TF main layer and PyTorch model both keep their blocks in
    ``BLOCKS`` (GPT's ``h``), each tapped by the layout's ``block_taps(block)``."""

    BLOCKS = "h"

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return layer_taps(getattr(main, self.BLOCKS), self.block_taps)  # type: ignore[attr-defined]

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        return layer_taps(getattr(model, self.BLOCKS), self.block_taps)  # type: ignore[attr-defined]


def extended_mask(mask: Any) -> Any:
    """``[batch, seq]`` 1/0 -> the additive ``[batch, 1, 1, seq]`` mask HF TF builds."""
    return (1.0 - mask[:, None, None, :]) * -10000.0
