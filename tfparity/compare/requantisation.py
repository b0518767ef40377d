"""A stored quantised model against a fresh quantisation of its float source, variable
by variable.

Keras's int8 and int4 quantisation is deterministic (abs-max scales per output channel,
then rounding), so quantising the float source afresh the same way must give the same
variables: int values within one rounding step, scales within float32 rounding. Where a
variable differs, *how* it differs says what happened to it, and this module names it:

- ``scaled``: a uniform factor on a scale (``scaled by 1.5``), on every entry or on some
  channels only;
- ``flipped``: signs flipped on some output channels (kernel values or scales);
- ``transposed`` / ``permuted``: the same values with axes swapped, or channels reordered;
- ``int_steps``: int values off by more than one rounding step (how many, the most);
- ``values``: float values that differ otherwise (how many, the largest relative);
- ``shape``, ``dtype``: not the same kind of variable at all;
- ``missing``: a variable on one side only.

Numpy only: the adapter hands over named arrays (:class:`QuantisedVariable`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

# float32 rounding of a scale computed the same way: a few units in the last place
SCALE_RTOL = 4 * float(np.finfo(np.float32).eps)
# the int values a rounding may move by (one step)
INT_STEPS = 1
KINDS = (
    "scaled",
    "flipped",
    "transposed",
    "permuted",
    "int_steps",
    "values",
    "shape",
    "dtype",
    "missing",
)


@dataclass(frozen=True)
class QuantisedVariable:
    """One variable of a quantised model: its path (``transformer_layer_0/self_attention/
    query/kernel_scale``), its values and the mode of the layer holding it (``int4``
    kernels are two int4 values packed per int8 byte, unpacked along the last axis)."""

    path: str
    values: np.ndarray
    mode: str = "int8"

    @property
    def layer(self) -> str:
        return self.path.rsplit("/", 1)[0] if "/" in self.path else self.path


@dataclass
class VariableDifference:
    """How one stored variable differs from its fresh twin. ``channels``: the output
    channels (indices over the channel axes) a ``flipped`` or partly ``scaled`` variable
    differs on; ``factor``: a ``scaled`` variable's factor; ``effect``: filled in by the
    caller, what putting the fresh twin back does to the outputs."""

    path: str
    layer: str
    kind: str
    detail: str
    differing: int = 0
    total: int = 0
    factor: float | None = None
    channels: list[list[int]] = field(default_factory=list)
    max_steps: float | None = None
    effect: dict | None = None


@dataclass
class Requantisation:
    """Every paired variable judged: ``identical`` of ``compared`` agree, ``differences``
    lists the others (kind and detail each)."""

    compared: int
    identical: int
    differences: list[VariableDifference]

    @property
    def reproduces(self) -> bool:
        return not self.differences


def compare_requantised(
    stored: Mapping[str, QuantisedVariable], fresh: Mapping[str, QuantisedVariable]
) -> Requantisation:
    """Each variable of ``stored`` against its twin in ``fresh`` (by path), and each one
    side holds alone (``missing``)."""
    differences = []
    identical = 0
    for path in sorted(set(stored) | set(fresh)):
        found = classify(stored.get(path), fresh.get(path))
        if found is None:
            identical += 1
        else:
            differences.append(found)
    return Requantisation(len(set(stored) | set(fresh)), identical, differences)


def classify(
    stored: QuantisedVariable | None, fresh: QuantisedVariable | None
) -> VariableDifference | None:
    """None where ``stored`` reproduces ``fresh``; else what kind of difference it is."""
    if stored is None or fresh is None:
        held = stored or fresh
        assert held is not None
        where = "the fresh quantisation" if stored is None else "the stored file"
        return VariableDifference(held.path, held.layer, "missing", f"only in {where}")
    path, layer = stored.path, stored.layer
    s, f = _values(stored), _values(fresh)
    if _is_int(s) != _is_int(f):
        text = f"dtype {stored.values.dtype}, fresh {fresh.values.dtype}"
        return VariableDifference(path, layer, "dtype", text, total=int(f.size))
    if s.shape != f.shape:
        axes = _transposition(s, f)
        if axes is not None:
            return VariableDifference(
                path, layer, "transposed", f"transposed (axes {axes})", int(s.size), int(s.size)
            )
        text = f"shape {list(s.shape)}, fresh {list(f.shape)}"
        return VariableDifference(path, layer, "shape", text, total=int(f.size))
    close = _close(s, f)
    if close.all():
        return None
    return _named(path, layer, s, f, close)


def _named(
    path: str, layer: str, s: np.ndarray, f: np.ndarray, close: np.ndarray
) -> VariableDifference:
    """The kind of a same-shaped difference, the most specific that explains it all."""
    total, differing = int(s.size), int((~close).sum())
    base = dict(path=path, layer=layer, differing=differing, total=total)
    flipped = _channels(~close, _close(s, -f))
    if flipped is not None:
        count, of = len(flipped[1]), flipped[0]
        text = f"signs flipped on {count} of {of} output channels ({_list(flipped[1])})"
        return VariableDifference(**base, kind="flipped", detail=text, channels=flipped[1])
    if not _is_int(s):
        scaled = _scaled(s, f, close)
        if scaled is not None:
            return VariableDifference(**base, kind="scaled", **scaled)
    axes = _transposition(s, f)
    if axes is not None:
        return VariableDifference(**base, kind="transposed", detail=f"transposed (axes {axes})")
    moved = _permutation(s, f)
    if moved is not None:
        text = f"channels permuted ({moved[0]} of {moved[1]} moved)"
        return VariableDifference(**base, kind="permuted", detail=text)
    if _is_int(s):
        steps = np.abs(s.astype(np.int64) - f.astype(np.int64))
        most = float(steps.max())
        text = f"{differing} of {total} int values off by more than one step (at most {most:g})"
        return VariableDifference(**base, kind="int_steps", detail=text, max_steps=most)
    rel = np.abs(s - f) / np.maximum(np.abs(f), np.finfo(np.float32).tiny)
    text = f"{differing} of {total} values differ (at most {float(rel.max()):.3g} relative)"
    return VariableDifference(**base, kind="values", detail=text)


def _values(variable: QuantisedVariable) -> np.ndarray:
    """The values compared: int4 bytes unpacked, floats in float64."""
    v = np.asarray(variable.values)
    if variable.mode == "int4" and _is_int(v) and v.dtype.itemsize == 1:
        return unpack_int4(v)
    return v.astype(np.int64) if _is_int(v) else v.astype(np.float64)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """Two signed int4 values per byte (Keras's ``pack_int4``: the low nibble first)
    interleaved along the last axis."""
    b = packed.astype(np.int64) & 0xFF
    low, high = b & 0x0F, b >> 4
    low, high = np.where(low > 7, low - 16, low), np.where(high > 7, high - 16, high)
    return np.stack([low, high], axis=-1).reshape(*packed.shape[:-1], -1)


def _is_int(a: np.ndarray) -> bool:
    return bool(np.issubdtype(a.dtype, np.integer))


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: within one int step, or float32 rounding of the larger magnitude."""
    if _is_int(a):
        return np.abs(a.astype(np.int64) - b.astype(np.int64)) <= INT_STEPS
    scale = np.maximum(np.abs(a), np.abs(b))
    return np.abs(a - b) <= SCALE_RTOL * scale + np.finfo(np.float32).tiny


def _splits(shape: tuple[int, ...]) -> Iterator[tuple[int, bool]]:
    """Ways to read an array as channels: the trailing axes from ``k`` on (output
    channels, tried first) or the leading ones up to ``k`` (an embedding's rows)."""
    for k in range(len(shape) - 1, 0, -1):
        yield k, True
    for k in range(1, len(shape)):
        yield k, False
    if len(shape) == 1:
        yield 0, True


def _as_channels(a: np.ndarray, k: int, trailing: bool) -> np.ndarray:
    """``a`` as rows of channels: (channels, values per channel)."""
    lead, tail = int(np.prod(a.shape[:k])), int(np.prod(a.shape[k:]))
    if trailing:
        return a.reshape(lead, tail).T
    return a.reshape(lead, tail)


def _channel_shape(shape: tuple[int, ...], k: int, trailing: bool) -> tuple[int, ...]:
    return tuple(shape[k:]) if trailing else tuple(shape[:k])


def _channels(differs: np.ndarray, ok: np.ndarray) -> tuple[int, list[list[int]]] | None:
    """The fewest channels, over one reading of the axes, that hold every differing
    value and wholly satisfy ``ok`` (each of their values negated): (how many channels
    that reading has, the channels' indices); None where no reading explains it."""
    best = None
    for k, trailing in _splits(differs.shape):
        d, o = _as_channels(differs, k, trailing), _as_channels(ok, k, trailing)
        hit = np.flatnonzero(d.any(axis=1))
        if hit.size and o[hit].all() and (best is None or hit.size < len(best[1])):
            shape = _channel_shape(differs.shape, k, trailing)
            index = [list(map(int, np.unravel_index(i, shape))) for i in hit]
            best = (int(d.shape[0]), index)
    return best


def _scaled(s: np.ndarray, f: np.ndarray, close: np.ndarray) -> dict | None:
    """A uniform factor on every differing value (with its channels where it is on
    some only); None otherwise."""
    nonzero = f != 0
    if not nonzero[~close].all():
        return None
    ratios = s[~close] / f[~close]
    factor = float(np.median(ratios))
    if factor == 0 or not np.allclose(ratios, factor, rtol=SCALE_RTOL * 4, atol=0.0):
        return None
    if close.sum() == 0 or (nonzero & close).sum() == 0:
        return dict(detail=f"scaled by {factor:.3g}", factor=factor)
    on = _channels(~close, _close(s, f * factor))
    if on is None:
        return dict(detail=f"scaled by {factor:.3g} on {int((~close).sum())} values", factor=factor)
    text = f"scaled by {factor:.3g} on {len(on[1])} of {on[0]} channels ({_list(on[1])})"
    return dict(detail=text, factor=factor, channels=on[1])


def _transposition(s: np.ndarray, f: np.ndarray) -> tuple[int, ...] | None:
    """The axis order that makes ``f`` into ``s`` (not the identity), or None."""
    if s.ndim < 2 or s.ndim > 4:
        return None
    for axes in itertools.permutations(range(f.ndim)):
        if axes == tuple(range(f.ndim)):
            continue
        moved = np.transpose(f, axes)
        if moved.shape == s.shape and _close(s, moved).all():
            return axes
    return None


def _permutation(s: np.ndarray, f: np.ndarray) -> tuple[int, int] | None:
    """How many channels moved, of how many, where ``s`` holds ``f``'s channels exactly, reordered
    (over some reading of the axes); None otherwise."""
    for k, trailing in _splits(s.shape):
        a, b = _as_channels(s, k, trailing), _as_channels(f, k, trailing)
        where = {row.tobytes(): i for i, row in enumerate(b)}
        order = [where.get(row.tobytes()) for row in a]
        if None not in order and sorted(order) == list(range(len(order))):
            moved = sum(1 for i, j in enumerate(order) if i != j)
            if moved:
                return moved, len(order)
    return None


def _list(channels: list[list[int]], most: int = 5) -> str:
    """``channel 3``, ``channels (0, 3), (1, 2)``: the first few."""
    texts = [str(c[0]) if len(c) == 1 else "(" + ", ".join(map(str, c)) + ")" for c in channels]
    shown = ", ".join(texts[:most]) + (f", ... {len(texts)} in all" if len(texts) > most else "")
    return ("channel " if len(texts) == 1 else "channels ") + shown
