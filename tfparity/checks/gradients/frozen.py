"""Weights a port freezes on purpose, for the gradients check (``--frozen``, ``frozen=``).

The TF-vs-PyTorch comparison judges every weight PyTorch differentiates: one TF gives no
gradient (``trainable=False``, a constant) fails, because a training run would leave it
where PyTorch's moves. A port that freezes weights by design (frozen embeddings for
fine-tuning) names them instead, by glob or substring over PyTorch weight names; they
are left out and the report lists them. A pattern that names no weight is refused
(exit 2): a typo must not silently judge what the user meant to exclude.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from fnmatch import fnmatchcase

from ...errors import TfparityError


def frozen_patterns(frozen: str | Sequence[str] | None) -> tuple[str, ...]:
    """``frozen`` as a tuple of non-empty patterns (one string is one pattern, not its
    characters)."""
    if frozen is None:
        return ()
    patterns = (frozen,) if isinstance(frozen, str) else tuple(frozen)
    for p in patterns:
        if not isinstance(p, str) or not p:
            raise TfparityError(
                f"A frozen pattern must be a non-empty string (a glob or a substring of "
                f"PyTorch weight names), not {p!r}."
            )
    return patterns


def matches(name: str, pattern: str) -> bool:
    """A glob over the whole name (``encoder.layer.*.LayerNorm.*``) or a substring of it
    (``word_embeddings``)."""
    return fnmatchcase(name, pattern) or pattern in name


def excluded_weights(patterns: Sequence[str], names: Collection[str] | None) -> list[str]:
    """The weights in ``names`` (PyTorch's, as the report names them) that ``patterns``
    exclude; refused when there is no PyTorch reference or a pattern matches nothing."""
    if not patterns:
        return []
    if names is None:
        raise TfparityError(
            "--frozen (frozen=) excludes PyTorch weights from the TF-vs-PyTorch comparison, "
            "which needs the PyTorch reference: drop --no-pt (pt=False) or the pattern."
        )
    unmatched = [p for p in patterns if not any(matches(n, p) for n in names)]
    if unmatched:
        sample = ", ".join(sorted(names)[:4])
        raise TfparityError(
            f"The frozen pattern(s) {', '.join(map(repr, unmatched))} match no PyTorch weight "
            f"of this model. Patterns are globs or substrings over the PyTorch weight names "
            f"the gradients report prints (relative to the base model: {sample}, ...)."
        )
    return sorted(n for n in names if any(matches(n, p) for p in patterns))


def excluded_note(patterns: Sequence[str], excluded: Sequence[str]) -> str:
    """The report's note: which patterns left out which weights (the first eight)."""
    shown = ", ".join(excluded[:8]) + (" ..." if len(excluded) > 8 else "")
    return (
        f"Frozen on purpose (--frozen/frozen= {', '.join(patterns)}): {len(excluded)} "
        f"weight(s) excluded from the comparison: {shown}."
    )
