"""Assertion helpers for tests: a check that fails raises AssertionError whose first
line is the verdict and the first divergence, then the hint, the layers around it,
the failing outputs and the first divergence's "Mismatched elements" block, each
tensor once, in about 25 lines (:func:`tfparity.report.assertion_message`, the one
builder, with the headline and rows of the renderer registered for the report's check:
a generate or backends report reads as its check's); the last line says where the full
report is. The error's ``reports`` attribute holds the Reports.

They work in any test runner. Under pytest with tfparity's plugin
(:mod:`tfparity.pytest_plugin`) they also pick up ``--tfparity-device``, load MODEL
specs through the session's model cache, and hand their reports to the plugin for
``--tfparity-json``. The plugin passes that through :data:`CONTEXT`, a context
variable it sets for the duration of one test and resets afterwards, so nothing
leaks from one test (or one thread) to another.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import validation
from .errors import TfparityError
from .inputs import Batch, InputOptions
from .orchestration import tolerance_from
from .results import Report


@dataclass
class HelperContext:
    """What the pytest plugin lends the helpers during one test."""

    device: str | None = None
    load: Callable[[str], Any] | None = None  # the session's cached model loader
    reports: list[Report] = field(default_factory=list)
    json_path: Path | None = None  # where --tfparity-json writes this test's reports
    # the session's warm backend processes (a BackendWorkers), made when first asked
    backend_workers: Callable[[], Any] | None = None


CONTEXT: ContextVar[HelperContext | None] = ContextVar("tfparity_test_context", default=None)


@contextlib.contextmanager
def helper_context(context: HelperContext) -> Iterator[HelperContext]:
    """Make ``context`` the helpers' context inside the block (the plugin wraps each
    test call in this)."""
    token = CONTEXT.set(context)
    try:
        yield context
    finally:
        CONTEXT.reset(token)


def assert_embeds_parity(
    model: Any = "minilm",
    *,
    texts: Sequence[str] | None = None,
    inputs: InputOptions | None = None,
    batches: Sequence[Batch] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    embeds_fn: Callable[[Batch], Any] | None = None,
    device: str | None = None,
    source: str | None = None,
    signature: str | None = None,
) -> Report:
    """Assert that the ``inputs_embeds`` path matches the ``input_ids`` path.

    ``model``: a MODEL spec, a TFModel, or a Hugging Face TF model. Inputs: ``batches``,
    else ``texts``, else ``inputs``, else the built-in sentences. ``atol``/``rtol``
    replace the dtype defaults (one alone: the other keeps its default, see
    :func:`~tfparity.orchestration.tolerance_from`); ``embeds_fn(batch)`` supplies your
    own embeddings. ``source``: for an export, the MODEL spec it came from;
    ``signature``: the export's signature to run (``--signature``).
    """
    __tracebackhide__ = True
    from .api import check_embeds

    _check_arguments(texts, inputs, batches, atol, rtol)
    validation.optional_callable(embeds_fn, "embeds_fn")
    tf_model = _tf_model(model, companion=source, signature=signature)
    report = check_embeds(
        tf_model,
        batches=_batches(tf_model, texts, inputs, batches),
        tolerance=tolerance_from(atol, rtol),
        embeds_fn=embeds_fn,
        execution=_execution(device),
    )
    _conclude([report])
    return report


def assert_crosscheck(
    tf_model: Any = "minilm",
    pt_model: Any = None,
    *,
    texts: Sequence[str] | None = None,
    inputs: InputOptions | None = None,
    batches: Sequence[Batch] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    reload: bool | None = None,
    device: str | None = None,
    head: str | None = None,
    source: str | None = None,
    layers: dict[Any, int] | None = None,
    weights: dict[str, Any] | None = None,
    signature: str | None = None,
) -> list[Report]:
    """Assert that the TF model agrees with PyTorch (float64 referee, or ``atol``/``rtol``).

    ``pt_model``: a MODEL spec, a :class:`PTModel`, a Hugging Face PyTorch model, or
    None: then the reference is loaded from ``tf_model``'s spec (the string given, or
    the spec a TFModel was loaded from; never copied from the model under test, see
    :mod:`tfparity.orchestration`). ``reload`` also checks the TF model after
    ``save_pretrained`` and reload; by default it does so only without ``pt_model``
    (a test that names its reference checks its port once). ``head`` picks the model
    class a spec loads on both sides (default: the one its config names, see
    :func:`tfparity.crosscheck`). ``source``: for an export (a SavedModel, a ``.keras``
    file), the MODEL spec it came from: the export is then checked against it too.
    ``signature``: the export's signature to run (``--signature``; default
    ``serving_default``, else its only one).
    A model of your own (a callable, a Keras 3 or tf-keras
    model) needs ``pt_model``; ``layers``/``weights`` map it onto Hugging Face hidden
    states and weight names (see :func:`tfparity.crosscheck`). Returns one Report per pass.
    """
    __tracebackhide__ = True
    from .api import crosscheck

    _check_arguments(texts, inputs, batches, atol, rtol)
    companion = source or (pt_model if isinstance(pt_model, str) else None)
    tf = _tf_model(
        tf_model,
        head,
        companion=companion,
        pt=pt_model,
        layers=layers,
        weights=weights,
        signature=signature,
    )
    reports = crosscheck(
        tf,
        pt=pt_model,
        head=head,
        source=source,
        batches=_batches(tf, texts, inputs, batches),
        tolerance=tolerance_from(atol, rtol),
        reload=reload,
        execution=_execution(device),
    )
    _conclude(reports)
    return reports


def assert_generation(
    model: Any = "tiny:gpt2/causal-lm",
    pt_model: Any = None,
    *,
    new_tokens: int = 8,
    texts: Sequence[str] | None = None,
    inputs: InputOptions | None = None,
    embeds: bool = True,
) -> Report:
    """Assert that greedy generation agrees, TF against PyTorch (:func:`tfparity.generate`):
    every token, or a flip only at a near-tie; every cached TF step consistent with its
    recomputation; generation from gathered ``inputs_embeds`` like the ids path. The
    error's first line names the first divergent step and the layer the cross-check
    finds, or the first cached step that differs. ``new_tokens`` defaults to 8 (tests
    stay fast; the CLI's default is 32)."""
    __tracebackhide__ = True
    from .api import generate

    validation.texts(texts)
    validation.instance(inputs, InputOptions, "inputs", "an InputOptions")
    report = generate(
        model, pt=pt_model, new_tokens=new_tokens, texts=texts, inputs=inputs, embeds=embeds
    )
    _conclude([report])
    return report


def assert_gradients(
    tf_model: Any = "minilm",
    pt_model: Any = None,
    *,
    texts: Sequence[str] | None = None,
    inputs: InputOptions | None = None,
    batches: Sequence[Batch] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 0,
    embeds_fn: Callable[[Batch], Any] | None = None,
    head: str | None = None,
    frozen: str | Sequence[str] | None = None,
) -> list[Report]:
    """Assert that gradients through ``inputs_embeds`` equal the ``input_ids`` path's
    (the word-embedding matrix's too) and that TF's gradients agree with PyTorch's
    (float64 referee, or ``atol``/``rtol``), every weight PyTorch differentiates but
    those ``frozen`` names on purpose; ``pt_model=False`` skips PyTorch. See
    :func:`tfparity.gradients`. Returns the Reports."""
    __tracebackhide__ = True
    from .api import gradients

    _check_arguments(texts, inputs, batches, atol, rtol)
    tf = _tf_model(tf_model, head)
    reports = gradients(
        tf,
        pt=pt_model,
        head=head,
        batches=_batches(tf, texts, inputs, batches),
        tolerance=tolerance_from(atol, rtol),
        seed=seed,
        embeds_fn=embeds_fn,
        frozen=frozen,
    )
    _conclude(reports)
    return reports


def assert_backends(model: str, **options: Any) -> Report:
    """Assert that one Keras 3 model computes the same on every Keras backend
    (:func:`tfparity.backends`, whose keyword ``options`` it takes): every layer of
    every backend within the float64 referee's bound (and Hugging Face's, for a
    keras-hub spec). The error's first line names the backend and the layer that part
    first; the layer table's rows around it follow. Under the pytest plugin the
    session's warm backend processes are reused (each backend's imports paid once)."""
    __tracebackhide__ = True
    from .cross_backend import backends

    context = CONTEXT.get()
    if "workers" not in options and context is not None and context.backend_workers:
        options["workers"] = context.backend_workers()
    report = backends(model, **options)
    _conclude([report])
    return report


# ----------------------------------------------------------------------------- helpers


def _conclude(reports: list[Report]) -> None:
    """Hand the reports to the plugin (for --tfparity-json), then judge them; the
    failure's text is the message registered for the failed report's check
    (:func:`tfparity.report.assertion_message`)."""
    __tracebackhide__ = True  # pytest shows the test's line, not this frame's locals
    from .report import assertion_message

    context = CONTEXT.get()
    if context is not None:
        context.reports.extend(reports)
    if all(r.passed for r in reports):
        return
    error = AssertionError(assertion_message(reports, _full_report(context)))
    error.reports = reports  # type: ignore[attr-defined]
    raise error


def _full_report(context: HelperContext | None) -> str:
    """The message's last line: where the full report is, or how to get it."""
    if context is None:  # not under tfparity's pytest plugin
        return (
            "full report: this AssertionError's .reports (render or write_json them), or "
            "run under pytest with --tfparity-json DIR"
        )
    if context.json_path is None:
        return "full report: rerun pytest with --tfparity-json DIR (one JSON file per test)"
    return f"full report: {context.json_path} (written when this test ends)"


def _tf_model(model: Any, head: str | None = None, **given: Any) -> Any:
    """The TF side; ``given``: ``companion`` and ``signature`` for an export, ``pt``,
    ``layers``, ``weights`` for a model of your own."""
    from .api import load_model

    context = CONTEXT.get()
    plain = head is None and not any(
        given.get(k) for k in ("companion", "layers", "weights", "signature")
    )
    if isinstance(model, str) and plain and context is not None and context.load:
        return context.load(model)  # the plugin caches plain specs only
    return load_model(model, head=head, **given)


def _execution(device: str | None) -> Any:
    """Where the helpers run the TF model: ``device``, else the plugin's
    --tfparity-device; ``None`` (as the model runs) when neither is set."""
    context = CONTEXT.get()
    device = device or (context.device if context is not None else None)
    if not device:
        return None
    from .adapters.runtime.execution_options import ExecutionOptions, expand_devices

    options = expand_devices(ExecutionOptions(), device)
    if len(options) != 1:
        raise TfparityError(
            f"--tfparity-device {device} names {len(options)} devices; name one "
            "(cpu, gpu:0, ...) per test run."
        )
    return options[0]


def _batches(
    tf_model: Any,
    texts: Sequence[str] | None,
    inputs: InputOptions | None,
    batches: Sequence[Batch] | None,
) -> Sequence[Batch]:
    if batches is not None:
        return batches
    from .api import make_batches

    if texts is not None:
        inputs = InputOptions(texts=validation.texts(texts))
    return make_batches(tf_model, inputs)


def _check_arguments(texts: Any, inputs: Any, batches: Any, atol: Any, rtol: Any) -> None:
    """Wrong argument types and values, named before any model loads."""
    validation.texts(texts)
    validation.instance(inputs, InputOptions, "inputs", "an InputOptions")
    validation.sequence_of(batches, Batch, "batches")
    validation.tolerance_values(atol=atol, rtol=rtol)
