"""Sub-layer taps and isolated runs, for every architecture whose registry record
describes its sub-layers (:class:`tfparity.architectures.SubLayers`).

Tap names, in the order data flows through a layer: ``embeddings``,
``layer_{i}.attention`` (self-attention + dense + residual + LayerNorm),
``layer_{i}.intermediate`` (FFN up-projection + activation), ``layer_{i}.output``
(FFN down-projection + residual + LayerNorm), ``pooler``.

*Taps* record these outputs during a full run in both frameworks (PyTorch forward
hooks; on the TF side the sub-layers' ``call`` is wrapped for the run). *Isolation*
feeds each TF sub-layer the PyTorch sub-layer's own input, so a component's own error
is separated from error carried in from below (the nobuco approach).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...architectures import COMPONENTS, SubLayers, Tap, for_config


def family_of(config: Any) -> SubLayers | None:
    """The sub-layer layout of ``config``'s architecture, where it has one."""
    return for_config(config).sublayers_for(config)


def supported(config: Any) -> bool:
    return family_of(config) is not None


def weight_scope(config: Any, layer: int | str, component: str | None) -> list[tuple[str, str]]:
    """Where a component's PyTorch parameters are, as (name prefix, name part) pairs for
    weight hints. Families name them exactly; for other architectures every parameter
    whose name holds the layer number (``h.3.``, ``block.3.``) or ``embed``/``pooler``."""
    family = family_of(config)
    if family is not None:
        parts = COMPONENTS if component is None else (component,)  # None: the whole layer
        return [(prefix, "") for part in parts for prefix in family.pt_prefixes(layer, part)]
    if isinstance(layer, int):
        return [("", f".{layer}.")]
    return {"embeddings": [("", "embed")], "pooler": [("", "pooler")]}.get(component, [])


class Recorder:
    """Where taps write: by tap name, or per call of a shared layer (ALBERT) as
    ``layer_{call}.{name}``."""

    def __init__(self) -> None:
        self.recorded: dict[str, np.ndarray] = {}
        self._calls: dict[str, int] = {}

    def store(self, name: str, tap: Tap, value: Any, as_numpy: Any) -> None:
        if tap.shared:
            call = self._calls.get(name, 0)
            self._calls[name] = call + 1
            name = f"layer_{call}.{name}"
        self.recorded[name] = as_numpy(value[0] if isinstance(value, (tuple, list)) else value)
