"""How finely a layer's compute dtype rounds, for the judges whose bounds must follow it.

A Keras layer under ``mixed_float16`` or ``mixed_bfloat16`` computes in half precision:
float16 keeps 11 significant bits and bfloat16 8, against float32's 24, so its honest
error to a float64 referee is 2^13 or 2^16 times a float32 layer's. A bound set for
float32 rounding (``tfparity backends``'s floor and ceiling) fails every backend of a
clean mixed model alike; set in units of the layer's own rounding, it holds the layer
to what its dtype can do. Error also flows downstream: a float32 layer fed by a
float16 one carries the float16 layer's error (:func:`coarsest` over the layers before
it). Plain Python: no numpy, no frameworks.
"""

from __future__ import annotations

from collections.abc import Iterable

# The unit roundoff (half the machine epsilon) of each float dtype a layer computes in.
UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
HALF = ("float16", "bfloat16")
# A half-precision layer's ceiling, in units of its rounding: 64 x 2^-11 = 3.1e-2 for
# float16, 64 x 2^-8 = 0.25 for bfloat16. A clean mixed model's layers show 1 to 2 units
# (measured on the example classifiers: 5e-4 relative RMSE under mixed_float16, 4.5e-3
# under mixed_bfloat16), and half precision's error grows with depth far faster than
# float32's; the float32 ceiling (1e-4 = 1678 units of float32's) would be 0.8 and 6.5
# relative in these units, and catch nothing.
HALF_CEILING_UNITS = 64


def compute_dtype(policy: str | None) -> str:
    """The dtype a Keras dtype policy computes in: ``mixed_float16`` and ``float16``
    compute in float16, ``mixed_bfloat16`` and ``bfloat16`` in bfloat16, a quantised
    policy as the float policy it was quantised from (``int8_from_mixed_bfloat16``);
    anything else (``float32``, ``None``) in float32."""
    name = str(policy or "")
    if name.endswith("bfloat16"):
        return "bfloat16"
    if name.endswith("float16"):
        return "float16"
    return "float64" if name.endswith("float64") else "float32"


def coarsest(dtypes: Iterable[str]) -> str:
    """The dtype that rounds most coarsely of ``dtypes`` (float32 for none)."""
    return max(dtypes, key=lambda d: UNIT_ROUNDOFF.get(d, 0.0), default="float32")


def units(dtype: str) -> float:
    """``dtype``'s rounding in units of float32's (1 for float32, 8192 for float16)."""
    return UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF["float32"]) / UNIT_ROUNDOFF["float32"]


def widened(floor: float, ceiling: float, dtype: str) -> tuple[float, float]:
    """The floor and ceiling (relative to the truth's RMS) of a layer rounding like
    ``dtype``, given those set for float32: the floor scales with the rounding (it is
    what a float32 layer may err where the others err nothing: about one unit), the
    ceiling is :data:`HALF_CEILING_UNITS` units of a half dtype's rounding, or the float32
    ceiling where that is wider (a user's ``--ceiling``)."""
    if dtype not in HALF:
        return floor, ceiling
    return floor * units(dtype), max(ceiling, HALF_CEILING_UNITS * UNIT_ROUNDOFF[dtype])
