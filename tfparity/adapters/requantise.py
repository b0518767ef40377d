"""The exact check's material (:class:`~.interfaces.requantisation.FreshTwin`) for a
stored quantised side, whichever tool quantised it: Keras's ``quantize`` (a ``.keras``
file or preset) or the LiteRT converter (a flatbuffer). Each kind of side reproduces its
quantisation its own way; this is the one door the check goes through."""

from __future__ import annotations

from typing import Any

from .interfaces.requantisation import FreshTwin
from .interfaces.sides import TFSide


def fresh_twin(
    stored: TFSide, source: TFSide | None, reference: Any = None, calibration: Any = None
) -> FreshTwin | None:
    """``stored`` against a fresh quantisation of ``source`` (``--source``), else of the
    reference checkpoint ``reference`` (a spec); None for a side that holds no stored
    quantisation tfparity can reproduce (a float model, a copy quantised here).
    ``calibration`` (``--calibration``, read by :mod:`.keras_hub.calibration`): the data
    a Keras GPTQ/AWQ file was quantised with."""
    from .exported.litert import LiteRTModel

    if isinstance(stored, LiteRTModel):
        from .exported.litert_requantise import litert_twin

        return litert_twin(stored, source, reference)
    from .keras_hub.requantise import fresh_twin as keras_twin

    return keras_twin(stored, source, reference, calibration)
