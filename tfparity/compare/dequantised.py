"""A quantised file's int8 weights against the reference's float weights, each read back
through its own scale.

A quantiser rounds each weight to the nearest step of its scale, so ``(q - zero) x
scale`` is within half a step of the weight it came from, whatever the activations do.
A damaged scale breaks that everywhere at once: x1.5 puts a weight's largest values
about 40 steps off, x1.05 about 6. The per-layer growth cannot always see such a scale:
a statically quantised graph re-quantises each activation to a calibrated range, which
clips most of what a larger weight adds (x1.5 on a tiny BERT's feed-forward scale grows
its layer's error x1.7, a clean layer's x1.5). The weights say it exactly, and say
which scale. Numpy only: the adapter hands over the values read back
(:class:`DequantisedWeight`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# Rounding to nearest leaves half a step; one step allows for a scale computed in
# float32 and a zero point rounded once more.
STEPS = 1.0


@dataclass(frozen=True)
class DequantisedWeight:
    """One int8 weight read back through its scale, in the reference's layout: the
    reference's name for it, its scale as the report names it, its layer, the values
    and the step (the scale, broadcastable to the values)."""

    name: str
    scale: str
    layer: int | str | None
    values: np.ndarray
    step: np.ndarray


@dataclass(frozen=True)
class StepsOff:
    """A weight whose read-back values lie more than :data:`STEPS` steps from the
    reference's: the most steps off, and the least-squares factor from the reference's
    values to them (1.5 for a scale times 1.5)."""

    weight: DequantisedWeight
    steps: float
    factor: float

    def text(self) -> str:
        return (
            f"weight scale {self.weight.scale} reads {self.weight.name} back as the "
            f"reference's x{self.factor:.3g}, up to {self.steps:.3g} steps off (a correct "
            f"quantisation is within half a step)"
        )


def steps_off(
    stored: Sequence[DequantisedWeight], reference: Mapping[str, np.ndarray]
) -> list[StepsOff]:
    """The weights of ``stored`` whose values are over :data:`STEPS` steps from the
    ``reference``'s of that name, the most steps off first."""
    found = []
    for w in stored:
        ref = np.asarray(reference[w.name], np.float64)
        step = np.broadcast_to(np.abs(np.asarray(w.step, np.float64)), ref.shape)
        usable = step > 0
        if not usable.any():
            continue
        off = np.abs(w.values - ref)[usable] / step[usable]
        steps = float(off.max())
        if steps > STEPS:
            norm = float(np.sum(ref * ref))
            factor = float(np.sum(w.values * ref) / norm) if norm > 0 else float("nan")
            found.append(StepsOff(w, steps, factor))
    return sorted(found, key=lambda s: -s.steps)
