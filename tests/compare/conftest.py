"""Fixtures the compare tests share."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import numpy as np
import pytest

from tfparity.compare import Comparison


@pytest.fixture
def grid() -> np.ndarray:
    """A small 2 x 3 float64 array (a fresh one for each test)."""
    return np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


@pytest.fixture
def roundtrip() -> Callable[[Comparison], Comparison]:
    """Serialise a Comparison as strict JSON (no NaN/Infinity: a NaN statistic raises)
    and rebuild it."""

    def back(c: Comparison) -> Comparison:
        text = json.dumps(dataclasses.asdict(c), allow_nan=False)
        return Comparison(**json.loads(text))

    return back
