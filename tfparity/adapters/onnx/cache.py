"""A causal LM graph's KV cache, read off its input and output names: which inputs
take the past keys and values, which outputs return them, and an empty past to start
from.

The names are Optimum's and transformers' convention (``past_key_values.{i}.key`` and
``.value`` in, ``present.{i}.key`` and ``.value`` out, each ``[batch, heads, sequence,
head_dim]``); :func:`.torch_export.export_with_cache` writes them. A graph fed an empty
past (sequence length 0) computes what the same graph without a cache would, so one
file serves both the cached decoding and its recomputation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import TfparityError

PAST = re.compile(r"^past_key_values\.(\d+)\.(key|value)$")
PRESENT = re.compile(r"^present\.(\d+)\.(key|value)$")
PAST_NAMES = "past_key_values.{i}.key / .value"
PRESENT_NAMES = "present.{i}.key / .value"
EXPORT_DOCS = "docs/onnx.md, section 'Generation on the graph's cache'"


def is_past(name: str) -> bool:
    """Whether a graph input takes a past key or value."""
    return PAST.match(name) is not None


def is_present(name: str) -> bool:
    """Whether a graph output returns a present key or value."""
    return PRESENT.match(name) is not None


@dataclass(frozen=True)
class CacheSlot:
    """One layer's key or value: the input it is fed as, the output that returns it, its
    heads and head width (the input's dims ``[batch, heads, sequence, head_dim]``, else
    the config's; None where neither says) and its dtype."""

    past: str
    present: str
    heads: int | None
    width: int | None
    dtype: str


@dataclass(frozen=True)
class Cache:
    """The graph's cache slots, layer by layer, key before value."""

    slots: tuple[CacheSlot, ...]

    @property
    def layers(self) -> int:
        return len(self.slots) // 2

    @property
    def outputs(self) -> list[str]:
        return [s.present for s in self.slots]

    def empty(self, rows: int) -> dict[str, np.ndarray]:
        """Each past input of length 0 for ``rows`` sequences: the prefill's."""
        unknown = next((s.past for s in self.slots if s.heads is None or s.width is None), None)
        if unknown is not None:
            raise TfparityError(
                f"The graph's {unknown} leaves its heads or head width dynamic and no config "
                "gives them: tfparity cannot make the empty past it starts from."
            )
        return {s.past: np.zeros((rows, s.heads, 0, s.width), s.dtype) for s in self.slots}

    def carried(self, presents: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One step's present tensors fed back as the next step's past inputs."""
        return {s.past: presents[s.present] for s in self.slots}


def cache_of(inputs: list[Any], outputs: list[str], config: Any = None) -> Cache | None:
    """The cache a graph's inputs (``GraphInput``s) and ``outputs`` (names) declare, or
    None where it takes no past inputs; heads and head width the graph leaves dynamic
    from ``config`` (Hugging Face's). Exit 2 where inputs and outputs do not pair up (a
    past input with no present output, a layer without its key or value)."""
    past = {(int(m[1]), m[2]): i for i in inputs if (m := PAST.match(i.name))}
    present = {(int(m[1]), m[2]): o for o in outputs if (m := PRESENT.match(o))}
    if not past:
        return None
    layers = 1 + max(layer for layer, _ in past)
    wanted = [(layer, kind) for layer in range(layers) for kind in ("key", "value")]
    lacking = [f"past_key_values.{i}.{k}" for i, k in wanted if (i, k) not in past]
    lacking += [f"present.{i}.{k}" for i, k in wanted if (i, k) not in present]
    if lacking:
        raise TfparityError(
            f"The graph's cache is incomplete: it has past_key_values inputs for {layers} "
            f"layers, but no {', '.join(lacking[:4])}{' ...' if len(lacking) > 4 else ''}. "
            f"Each layer needs {PAST_NAMES} inputs and {PRESENT_NAMES} outputs ({EXPORT_DOCS})."
        )
    heads, width = config_dims(config)
    slots = []
    for w in wanted:
        dims = (tuple(past[w].dims) + (None,) * 4)[:4]
        slots.append(
            CacheSlot(past[w].name, present[w], dims[1] or heads, dims[3] or width, past[w].dtype)
        )
    return Cache(tuple(slots))


def config_dims(config: Any) -> tuple[int | None, int | None]:
    """(key/value heads, head width) from a Hugging Face config; None where it lacks them."""
    heads = getattr(config, "num_attention_heads", None)
    hidden = getattr(config, "hidden_size", None)
    kv = getattr(config, "num_key_value_heads", None) or heads
    width = getattr(config, "head_dim", None) or (hidden // heads if heads and hidden else None)
    return kv, width


def no_cache(name: str, inputs: list[str], outputs: list[str]) -> TfparityError:
    """The refusal of a graph without cache inputs: what it has and lacks, and how to
    export one with them."""
    has = [o for o in outputs if is_present(o)]
    lacks = f"no {PAST_NAMES} inputs" + ("" if has else f" and no {PRESENT_NAMES} outputs")
    return TfparityError(
        f"{name} cannot generate: tfparity generate runs an ONNX causal LM on the graph's "
        f"KV cache, and this graph has {lacks} (inputs: {', '.join(inputs)}; outputs: "
        f"{', '.join(outputs[:6])}{' ...' if len(outputs) > 6 else ''}). Export it with "
        "its cache: tfparity.adapters.onnx.torch_export.export_with_cache(model, path), or "
        f"Optimum's `optimum-cli export onnx --task text-generation-with-past` ({EXPORT_DOCS}). "
        "A file without a cache is checked by `tfparity crosscheck`."
    )
