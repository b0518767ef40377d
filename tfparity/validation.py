"""Argument checks for the Python API and the assertion helpers (numpy only).

A public function that is given the wrong kind of argument must say which argument
and why, at once, instead of failing deep inside TensorFlow or, worse, passing: a
``str`` given as ``texts`` is iterable and would be run character by character, and an
``embeds_fn`` that returns None made the ``inputs_embeds`` path silently run the ids.
Wrong types raise ``TypeError`` naming the parameter; wrong values raise a
:class:`~tfparity.errors.TfparityError` (exit 2 on the CLI).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .compare import Tolerance, check_tolerance_value, to_numpy
from .errors import TfparityError


class NothingComparedError(TfparityError, ValueError):
    """A check found nothing to compare (every element masked, no items, no mode can
    run): a parity tool that passes then would pass vacuously."""


class ArgumentError(TfparityError, ValueError):
    """A check's argument no run can take (``permutations=0``, ``localise="sometimes"``):
    a ValueError to the API's callers, exit 2 on the CLI. Raised by each check's
    ``Options.from_arguments``, the one place its arguments are checked for both."""


def texts(value: Any, name: str = "texts") -> tuple[str, ...] | None:
    """``value`` as a tuple of non-blank, valid Unicode strings (None stays None): the
    one home of these checks, which :class:`~tfparity.inputs.InputOptions` runs when
    the arguments are read, before any framework import."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        raise TypeError(
            f"{name} must be a sequence of strings, not one {type(value).__name__} "
            f"(it would be run character by character); write {name}=[{value!r}]."
        )
    if not isinstance(value, Sequence) and not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a sequence of strings, not {type(value).__name__}.")
    items = tuple(value)
    if not items:
        raise TfparityError(f"No texts given: {name} is empty; give at least one text.")
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] must be a str, not {type(text).__name__}.")
        if not text.strip():  # nothing to tokenize: known before any model loads
            raise TfparityError(f"Text {i + 1} is empty; give at least one word.")
        unicode_text(text, f"{name}[{i}]")
    return items


def unicode_text(text: str, where: str) -> str:
    """Refuse a string that is not valid Unicode (a lone surrogate such as the JSON
    escape ``\\ud800``): tokenizers fail on it deep inside a run."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TfparityError(
            f"{where} is not valid Unicode: it holds {text[exc.start]!r} at character "
            f"{exc.start} (a lone surrogate, e.g. a JSON '\\ud800' escape); fix the text."
        ) from None
    return text


def tolerance(value: Any, name: str = "tolerance") -> Tolerance | None:
    if value is not None and not isinstance(value, Tolerance):
        raise TypeError(
            f"{name} must be a tfparity.Tolerance or None, not {type(value).__name__}; "
            "e.g. Tolerance(atol=1e-5, rtol=1e-6)."
        )
    return value


def tolerance_values(**values: Any) -> None:
    """``atol=..., rtol=...``: each None or a finite number >= 0."""
    for name, value in values.items():
        if value is not None:
            check_tolerance_value(value, name)


def optional_callable(value: Any, name: str) -> Callable | None:
    if value is not None and not callable(value):
        raise TypeError(
            f"{name} must be callable (batch -> embeddings), not {type(value).__name__}."
        )
    return value


def instance(value: Any, types: type | tuple[type, ...], name: str, what: str) -> Any:
    if value is not None and not isinstance(value, types):
        raise TypeError(f"{name} must be {what}, not {type(value).__name__}.")
    return value


def seed(value: Any) -> int:
    """A seed is an int >= 0 (a bool is refused: it is an int to Python, not a seed)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ArgumentError(f"seed must be an int >= 0, not {value!r}.")
    return value


def one_of(value: Any, choices: Sequence[str], name: str) -> str:
    """``value`` if it is one of ``choices``; an :class:`ArgumentError` naming them else."""
    if value not in choices:
        words = " or ".join(repr(c) for c in choices)
        raise ArgumentError(f"{name} must be {words}, not {value!r}.")
    return value


def sequence_of(value: Any, cls: type, name: str) -> Any:
    """A non-empty sequence of ``cls`` (e.g. ``batches``); None stays None."""
    if value is None:
        return None
    if isinstance(value, cls) or not isinstance(value, Sequence) or isinstance(value, str):
        raise TypeError(f"{name} must be a sequence of {cls.__name__}, not {type(value).__name__}.")
    if not value:
        raise NothingComparedError(f"{name} is empty: there would be nothing to compare.")
    for i, item in enumerate(value):
        if not isinstance(item, cls):
            raise TypeError(f"{name}[{i}] must be a {cls.__name__}, not {type(item).__name__}.")
    return value


def model_spec(value: Any, name: str) -> Any:
    """A MODEL spec, a loaded model, or a framework model object: not a number, a path
    object is allowed as its string."""
    if value is None or isinstance(value, (int, float, bool, bytes, list, tuple, dict)):
        raise TypeError(
            f"{name} must be a MODEL spec (str), a loaded model or a Hugging Face model, "
            f"not {type(value).__name__}."
        )
    return value


def embeds(value: Any, batch_shape: tuple[int, int], width: int, name: str = "embeds_fn") -> Any:
    """What ``embeds_fn(batch)`` returned: a float tensor ``[batch, seq, width]``;
    anything else is named as ``embeds_fn``'s error (None used to make the
    ``inputs_embeds`` path run the ids, a vacuous PASS)."""
    if value is None:
        raise TfparityError(
            f"{name} returned None; it must return the embeddings [batch, seq, hidden] "
            "for the batch it is given."
        )
    if isinstance(value, (str, bytes, dict)) or not (
        hasattr(value, "shape") or isinstance(value, (list, tuple))
    ):
        raise TfparityError(
            f"{name} returned {type(value).__name__}, not a tensor; it must return the "
            f"embeddings as a tf.Tensor or numpy array [batch, seq, hidden]."
        )
    array = to_numpy(value)
    expected = (*batch_shape, width)
    if array.dtype.kind != "f":
        raise TfparityError(
            f"{name} returned a {type(value).__name__} of {array.dtype} values; embeddings "
            "are floats [batch, seq, hidden]."
        )
    if tuple(array.shape) != expected:
        raise TfparityError(
            f"{name} returned shape {list(array.shape)}; the batch needs {list(expected)} "
            "([batch, seq, hidden])."
        )
    # NaN/Inf values are not refused here: they are what a user debugging a pipeline
    # needs to see, as failed comparisons that name where they are.
    return value


# Config fields that two sides of a cross-check must share (absent ones are skipped).
_SHAPE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def same_architecture(tf_model: Any, pt_model: Any) -> None:
    """Refuse a cross-check of two different architectures (``--tf`` and ``--pt`` of
    different model types, or golden outputs of another model), naming both; it used
    to fail inside a TF layer with a shape error, or be reported as a parity failure."""

    def facts(model: Any) -> dict[str, Any]:
        # an HF config (aliases such as GPT-2's n_embd resolve), or a stored namespace
        return {k: getattr(model.config, k, None) for k in ("model_type", *_SHAPE_FIELDS)}

    tf, pt = facts(tf_model), facts(pt_model)
    tf_name, pt_name = tf_model.name, pt_model.name
    if tf["model_type"] and pt["model_type"] and tf["model_type"] != pt["model_type"]:
        raise TfparityError(
            f"The TF model {tf_name} is a {tf['model_type']} and the PyTorch reference "
            f"{pt_name} is a {pt['model_type']}: a cross-check compares one architecture "
            f"in two frameworks. Point --pt (or --load-outputs) at the {tf['model_type']} "
            f"checkpoint {tf_name} was ported from."
        )
    differ = [
        f"{k} {tf[k]} vs {pt[k]}"
        for k in _SHAPE_FIELDS
        if tf[k] is not None and pt[k] is not None and tf[k] != pt[k]
    ]
    if differ:
        raise TfparityError(
            f"The TF model {tf_name} and the PyTorch reference {pt_name} are both "
            f"{tf['model_type']} but of different sizes ({'; '.join(differ)}): they are not "
            f"the same model, so their outputs cannot be compared. Point --pt (or "
            f"--load-outputs) at the checkpoint {tf_name} was ported from."
        )


# Elements per block when a large TF variable is scanned for NaN (4 MB of float32).
_SCAN_BLOCK = 1 << 20


def _weight_blocks(weight: Any, block: int | None = None) -> Iterator[np.ndarray]:
    """A weight's values for the NaN scan, in blocks of rows where that is cheaper.

    A TF variable that a gather has read (the word embeddings, after any run) is in
    copy-on-read mode: reading it whole copies it into fresh memory, whose page faults
    cost more than the scan itself. Its rows are gathered
    ``block`` elements at a time instead, into memory that is reused. Other TF
    variables are read in place (``value()``), torch and numpy arrays as they are.
    ``block``: elements per block (default ``_SCAN_BLOCK``, read at call time)."""
    block = block or _SCAN_BLOCK
    shape = tuple(getattr(weight, "shape", ()))
    if callable(getattr(weight, "sparse_read", None)) and len(shape) >= 2:
        step = max(1, block // max(1, math.prod(shape[1:])))
        if shape[0] > step:
            for start in range(0, shape[0], step):
                rows = np.arange(start, min(start + step, shape[0]))
                yield to_numpy(weight.sparse_read(rows))
            return
    read = getattr(weight, "value", None)
    yield to_numpy(read() if callable(read) else weight)


def nonfinite_weights(named: list[tuple[str, Any]], side: str = "") -> list:
    """One failed :class:`~tfparity.compare.Comparison` per weight holding NaN or Inf.

    ``named``: ``(name, weight)`` pairs, a side's ``named_weights()``. Outputs alone
    miss them: a NaN in an unused vocabulary row, or in a position row
    beyond the inputs, never reaches an output, so both paths agree and the check
    passed a broken model without a word.
    """
    from .compare import all_finite, failed_comparison

    found = []
    for name, weight in named:
        if all(x.dtype.kind not in "fc" or all_finite(x) for x in _weight_blocks(weight)):
            continue
        array = to_numpy(weight)
        n_nan, n_inf = int(np.isnan(array).sum()), int(np.isinf(array).sum())
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        label = f"weights:{side + ':' if side else ''}{name}"
        found.append(
            failed_comparison(
                label,
                f"The weight {name}{f' ({side})' if side else ''} holds {n_nan} NaN and "
                f"{n_inf} Inf values (first at index {where}), even if the inputs never "
                "reach them: the checkpoint is broken. Find where they came from (a failed "
                "conversion, an overflow in training, an uninitialised row).",
                list(array.shape),
                str(array.dtype),
            )
        )
    return found
