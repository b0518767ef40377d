"""The gradients check's options (``tfparity gradients``, :func:`tfparity.gradients`),
checked once for both by :meth:`GradientsOptions.from_arguments` (numpy only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ... import validation
from ...compare import Referee, Tolerance
from ...errors import TfparityError
from ...inputs import Batch
from .frozen import frozen_patterns


@dataclass(frozen=True)
class GradientsOptions:
    """``tolerance``: the ids-vs-embeds judge (None: float32's defaults) and, when given,
    TF vs PyTorch's too instead of the float64 referee; ``embeds_fn(batch)``: your
    embeddings, made inside the tape (default: the Keras-side gather)."""

    seed: int = 0
    tolerance: Tolerance | None = None
    referee: Referee = Referee()
    embeds_fn: Callable[[Batch], Any] | None = None
    top_weights: int = 3
    frozen: tuple[str, ...] = ()  # globs/substrings of PyTorch weights frozen on purpose

    @classmethod
    def from_arguments(
        cls,
        *,
        seed: int = 0,
        tolerance: Tolerance | None = None,
        embeds_fn: Callable[[Batch], Any] | None = None,
        frozen: str | Sequence[str] | None = None,
        with_reference: bool = True,
        pt_config: dict[str, Any] | None = None,
        backend: str | None = None,
    ) -> GradientsOptions:
        """The options :func:`tfparity.gradients` and ``tfparity gradients`` were given,
        checked once for both before any framework import (exit 2 for a bad one), with
        what contradicts no PyTorch reference (``with_reference=False``: ``pt=False``,
        ``--no-pt``): ``pt_config``, a remote ``backend`` and ``frozen`` are all about
        the TF-vs-PyTorch report, which it leaves out."""
        validation.tolerance(tolerance)
        validation.seed(seed)
        validation.optional_callable(embeds_fn, "embeds_fn")
        patterns = frozen_patterns(frozen)
        if not with_reference:
            if pt_config:
                raise TfparityError(
                    "--pt-config (pt_config=) changes the PyTorch reference; drop --no-pt "
                    "(pt=False)."
                )
            if backend not in (None, "tensorflow"):
                raise TfparityError(
                    f"--backend {backend} runs the TF-vs-PyTorch half only (the worker is "
                    "given token ids: no inputs_embeds path to compare), which --no-pt "
                    "leaves out: drop --no-pt (pt=False)."
                )
            if patterns:
                raise TfparityError(
                    "--frozen (frozen=) excludes PyTorch weights from the TF-vs-PyTorch "
                    "report; drop --no-pt (pt=False)."
                )
        return cls(seed=seed, tolerance=tolerance, embeds_fn=embeds_fn, frozen=patterns)
