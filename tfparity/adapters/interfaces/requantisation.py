"""What the exact check of a stored quantised model needs from its side, whatever wrote
it (Keras's ``quantize`` on a ``.keras`` file, the LiteRT converter on a flatbuffer):
its quantised variables and their fresh twins by path, a run of each model, and a way to
put one fresh variable back for one run (tfparity/checks/crosscheck/requantised.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...compare.requantisation import QuantisedVariable


@dataclass
class FreshTwin:
    """The stored model's quantised variables and their fresh twins, by path; or, with
    ``skipped``, why there are none to compare."""

    source: str
    mode: str
    skipped: str | None = None
    stored: dict[str, QuantisedVariable] = field(default_factory=dict)
    fresh: dict[str, QuantisedVariable] = field(default_factory=dict)
    parts: dict[str, int | str] = field(default_factory=dict)  # layer path -> block
    run_stored: Callable[[Any], Any] | None = None
    run_fresh: Callable[[Any], Any] | None = None
    put_back: Callable[[str], Any] | None = None  # a context manager per variable path
    layers: dict[str, str] = field(default_factory=dict)  # layer path -> mode
    tool: str = "Keras"  # who quantised it, and quantises the source afresh
    # the calibration data a GPTQ/AWQ model is quantised afresh with (--calibration):
    # file, samples, sequence_length, keras_uses_it; None for another mode
    calibration: dict[str, Any] | None = None
