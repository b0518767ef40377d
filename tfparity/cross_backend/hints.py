"""Hints for the first divergence of ``tfparity backends``: which known backend-specific
computation the failing layer may hold, read from what each backend's process recorded
of the layer (its class and base classes, its dtype policy, its config's keys; see
:func:`tfparity.adapters.keras_backends.worker.layer_facts`) and from the backend's
precision facts. Plain data in, sentences out: no numpy, no frameworks.

The known ones, each a documented way Keras 3's backends part on the same model:

- ``top_k`` / ``argsort``: ties are ordered by each backend's own kernel, so a router
  or a sampler picks different indices on equal scores, and everything after differs
  by far more than rounding;
- ``dot_product_attention``: on JAX and torch Keras may call a fused (flash) kernel,
  which sums the softmax in another order, and on some devices in lower precision;
- a float16 / bfloat16 dtype policy: the layer computes at 3 or 8 significant bits
  fewer than float32, on the backends whose policy says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_HALF = ("float16", "bfloat16")  # mixed_float16 and mixed_bfloat16 contain them
_FLASH_BACKENDS = ("jax", "torch")


@dataclass(frozen=True)
class KnownOp:
    """A backend-specific computation and how to recognise a layer that may hold it:
    a pattern over the layer's class, its base classes and its config's keys."""

    name: str
    pattern: re.Pattern[str]


TOP_K = KnownOp("top_k", re.compile(r"top_?k|argsort|router|moe|experts?_per|sampler", re.I))
ATTENTION = KnownOp(
    "dot_product_attention",
    re.compile(r"attention|transformer|(encoder|decoder)_?(layer|block)", re.I),
)


def _words(facts: Mapping[str, Any]) -> list[str]:
    """What the patterns read: the class, its bases, its config's keys."""
    return [str(facts.get("class", "")), *facts.get("bases", []), *facts.get("config_keys", [])]


def _holds(op: KnownOp, facts: Mapping[str, Any]) -> bool:
    return any(op.pattern.search(w) for w in _words(facts))


def layer_hints(
    layer: str,
    backends: Sequence[str],
    layer_facts: Mapping[str, Mapping[str, Mapping[str, Any]]],
    precision: Mapping[str, Mapping[str, Any]],
    shared: bool = False,
) -> list[str]:
    """The hints for ``layer`` (a recorded name: ``layer``, ``layer/k``, or a sublayer
    tap's path, read from that sublayer's own facts) failing on
    ``backends``; ``layer_facts`` and ``precision`` per backend as the processes
    recorded them. Empty when the layer holds none of the known ops. ``shared``: every
    backend parts alike, which tie order and a flash path (each backend's own) do not
    explain, so only a half-precision policy is hinted."""
    called = layer.split("#", 1)[0]  # a sublayer's second call is ``path#1``
    recorded = any(called in f for f in layer_facts.values())  # a sublayer tap's path
    name = called if recorded else layer.split("/", 1)[0]
    seen = {b: f[name] for b, f in layer_facts.items() if name in f}
    if not seen:
        return []
    facts = next(iter(seen.values()))
    what = f"layer {name} ({facts.get('class', '?')})"
    hints = []
    half = {b: f["dtype_policy"] for b, f in seen.items() if _half(f.get("dtype_policy"))}
    if half:
        where = ", ".join(f"{p} on {b}" for b, p in half.items())
        hints.append(
            f"{what} computes in half precision ({where}): float16 keeps 11 significant "
            "bits and bfloat16 8, against float32's 24; its floor and ceiling are already "
            "in units of that rounding, so it parts by more than its dtype explains (a "
            "kernel that computes another way in half precision, or a fault)"
        )
    if shared:
        return hints
    if _holds(TOP_K, facts):
        hints.append(
            f"{what} may use top_k or argsort: each backend orders tied scores its own way, "
            "so equal scores pick different indices (a router's experts, a sampler's "
            "tokens); check the scores for ties before suspecting the arithmetic"
        )
    if _holds(ATTENTION, facts):
        flash = ", ".join(  # recorded only where set; else Keras decides per call
            f"{b} flash_attention {precision.get(b, {}).get('flash_attention', 'default')}"
            for b in _FLASH_BACKENDS
            if b in seen
        )
        hints.append(
            f"{what} computes attention: on JAX and torch keras.ops.dot_product_attention "
            "may take a fused (flash) path, which sums the softmax in another order, on "
            "some devices at lower precision"
            + (f" ({flash})" if flash else "")
            + "; rerun with keras.config.disable_flash_attention() in an --import module "
            "to tell"
        )
    return hints


def _half(policy: Any) -> bool:
    return isinstance(policy, str) and any(h in policy for h in _HALF)
