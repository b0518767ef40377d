"""A known difference of a port: where the cross-check must fail, and why. Its own
module because both the registry record (:mod:`.base`) and keras-hub's layouts
(:mod:`.keras_hub_layouts`) name one."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KnownDifference:
    """Where transformers' own TF port really differs from its PyTorch model: the
    cross-check must FAIL there (``hidden_state``, ``layer``, ``component``, with
    ``hint`` in its hint). ``finding`` says what differs, for the docs; tests hold
    every record to it on the tiny model.

    ``reference_config``: the config change that makes PyTorch compute what the port
    computes (BERT's tanh GELU: ``{"hidden_act": "gelu_pytorch_tanh"}``), where one
    exists; the hint then says how to check the rest of the port (``--pt-config``), and
    tests hold the port to PASS with it on the tiny model."""

    hidden_state: int
    layer: int | str
    component: str | None
    hint: str
    finding: str
    reference_config: dict[str, Any] | None = field(default=None, hash=False)

    def reproduced_by(self, config: Any) -> bool:
        """Whether the reference ``config`` already computes as the port does (it was
        built with :attr:`reference_config`): a failure there is then not this one."""
        wanted = self.reference_config or {}
        return bool(wanted) and all(getattr(config, k, None) == v for k, v in wanted.items())

    def rerun(self) -> str:
        """What the hint ends with: how to check the rest of the port ('' without a
        :attr:`reference_config`)."""
        if not self.reference_config:
            return ""
        items = " ".join(
            f"--pt-config {pt_config_item(k, v)}" for k, v in self.reference_config.items()
        )
        return f"; to check the rest of the port, rerun with {items}"


def pt_config_item(key: str, value: Any) -> str:
    """``KEY=VALUE`` as ``--pt-config`` reads it back (a string stays bare unless it
    would read as JSON: ``1e-06``, ``true``)."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return f"{key}={value}"
    return f"{key}={json.dumps(value)}"
