"""Report: what every check returns, as plain dataclasses (JSON without custom encoders)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ._version import __version__
from .compare import Comparison

Component = Literal["embeddings", "attention", "intermediate", "output", "pooler", "head"]

# Comparisons of what travels with the weights rather than of tensors (label maps,
# tokenizers: tfparity/checks/artefacts.py): their failures compared no values, so the
# verdict line names them rather than counting them as tensors.
ARTEFACT_PREFIXES = ("config:", "tokenizer:")


def is_artefact(comparison: Comparison) -> bool:
    """Whether ``comparison`` judged a label map or a tokenizer, not a tensor."""
    return comparison.name.startswith(ARTEFACT_PREFIXES)


@dataclass(frozen=True)
class Hint:
    """One likely cause of a divergence: its kind (``config``, ``weight``, ``unported``,
    ``activation``, ``layernorm``, ``note``), the PyTorch weight it names (if any), and
    the sentence a user reads. Kept as a record so nothing parses the sentence back."""

    kind: str
    text: str
    weight: str | None = None
    # a weight whose rows are PyTorch's reordered: TF's row i is PyTorch's row
    # permutation[i] (a head's classes, or QA's start and end, in another order)
    permutation: tuple[int, ...] | None = None


@dataclass
class Divergence:
    """Where two runs first part.

    ``hidden_state`` indexes the model's ``hidden_states`` tuple (0 = embedding output,
    k = output of encoder layer k-1); ``layer`` is ``"embeddings"`` or that layer's index;
    ``component`` is None where the architecture has no sub-layer taps. Past a seq2seq
    model's clean encoder, ``layer`` is ``"decoder"`` and ``decoder_hidden_state`` indexes
    its decoder's ``decoder_hidden_states`` (0 = its embedding output, k = output of
    decoder layer k-1); None elsewhere.
    """

    hidden_state: int | None
    layer: str | int
    component: Component | None
    hint: str = ""
    decoder_hidden_state: int | None = None
    # The known cause, one fact (a weight scaled, a config field, an unported weight),
    # which the verdict line states; empty where the hint has only likely causes.
    cause: str = ""


@dataclass
class Report:
    """The result of one check on one model."""

    check: str
    model: str
    passed: bool
    comparisons: list[Comparison] = field(default_factory=list)
    first_divergence: Divergence | None = None
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tfparity_version: str = __version__

    @property
    def failures(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.passed]

    @property
    def tensors(self) -> list[Comparison]:
        """The comparisons of tensors (not of label maps or tokenizers)."""
        return [c for c in self.comparisons if not is_artefact(c)]

    @property
    def artefact_failures(self) -> list[Comparison]:
        """The failed comparisons of label maps and tokenizers."""
        return [c for c in self.failures if is_artefact(c)]

    def worst(self) -> Comparison | None:
        """The tensor a verdict line names: on a failure the first failing one (one that
        compared nothing, a shape mismatch or a missing output, before the largest
        difference: a passing tensor's larger difference is not what failed), else the
        largest difference."""
        tensors = self.tensors  # a label map's or tokenizer's failure leads on its own
        failing = [c for c in tensors if not c.passed]
        if failing:
            return min(failing, key=lambda c: (c.problem is None, -c.max_abs_diff))
        return max(tensors, key=lambda c: c.max_abs_diff, default=None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (NaN and Inf become None, so strict JSON parsers accept it)."""
        data = asdict(self)
        data = {"tfparity_version": data.pop("tfparity_version"), **data}
        return _json_safe(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """The report a :meth:`to_dict` (a ``--json`` file) holds: its comparisons and
        first divergence as their dataclasses again, so that any renderer reads it."""
        d = data.get("first_divergence")
        return cls(
            check=data["check"],
            model=data["model"],
            passed=data["passed"],
            comparisons=[Comparison(**c) for c in data.get("comparisons", [])],
            first_divergence=None if d is None else Divergence(**d),
            details=data.get("details", {}),
            notes=data.get("notes", []),
            tfparity_version=data.get("tfparity_version", __version__),
        )


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value
