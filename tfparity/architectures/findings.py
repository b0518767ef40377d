"""A known difference of a port: where the cross-check must fail, and why. Its own
module because both the registry record (:mod:`.base`) and keras-hub's layouts
(:mod:`.keras_hub_layouts`) name one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownDifference:
    """Where transformers' own TF port really differs from its PyTorch model: the
    cross-check must FAIL there (``hidden_state``, ``layer``, ``component``, with
    ``hint`` in its hint). ``finding`` says what differs, for the docs; tests hold
    every record to it on the tiny model."""

    hidden_state: int
    layer: int | str
    component: str | None
    hint: str
    finding: str
