"""Reports and their renderings (text, JSON, HTML); numpy-free and framework-free.

Each kind of report is rendered by the :class:`Renderer` registered for its
``Report.check`` (and the variant its details declare) in :data:`RENDERERS`: its text,
its verdict line and the rows of the pytest assertion message. :func:`render`
(``tfparity.render``), the HTML page and the assertion helpers dispatch through it, so
that a report is never told apart by the keys its details happen to hold. A check of
your own (not registered) is rendered as a tensor check: its comparisons, layers and
verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol, runtime_checkable

from ..results import Divergence, Report
from . import (
    backends,
    backends_quantised,
    brief,
    generation,
    gradients,
    modes,
    runtimes,
    sections,
    text,
)


@dataclass(frozen=True)
class Renderer:
    """How one kind of report reads: ``text(report, verbose=...)``, the whole report;
    ``verdict(report)``, its ``PASS``/``FAIL`` line; ``headline(report)`` and
    ``rows(report)``, the first line and the body of a failed assertion helper's message,
    built from the report's rows and divergence (:func:`assertion_message` puts them
    together). ``layer_x_backend``: its ``details.layers`` is the layer x backend table
    of ``tfparity backends``, not the cross-check's per-layer table."""

    text: Callable[..., str]
    verdict: Callable[[Report], str]
    headline: Callable[[Report], str]
    rows: Callable[[Report], list[str]]
    layer_x_backend: bool = False


def _sections(render: Callable[[Report], str]) -> Callable[..., str]:
    """A renderer without a verbose form (diagnose, embeddings, positions): every fact
    is always shown."""

    def text_of(report: Report, *, verbose: bool = False) -> str:
        return render(report)

    return text_of


def _tensor_check(
    render: Callable[..., str] = text.render, verdict: Callable[[Report], str] = text.verdict_line
) -> Renderer:
    """A check whose report is tensor comparisons (with the cross-check's layer table);
    ``verdict``: its verdict line, where it says more than the tensors' count."""
    return Renderer(
        render,
        verdict,
        partial(brief.headline, verdict=verdict),
        partial(brief.rows, verdict=verdict),
    )


def _details_check(render: Callable[[Report], str], verdict: Callable[[Report], str]) -> Renderer:
    """A check whose report is its details' tables and whose verdict says what failed."""
    return replace(_tensor_check(verdict=verdict), text=_sections(render))


def _backends(render: Callable[..., str], verdict: Callable[[Report], str], rows) -> Renderer:
    """A ``tfparity backends`` report: its message leads with the verdict line."""
    return Renderer(render, verdict, verdict, rows, layer_x_backend=True)


TENSORS = _tensor_check()
GRADIENTS = _tensor_check(gradients.render_gradients)

# Report.check -> its renderer: every check a command or an API function writes. A check
# that writes two shapes of report under its one check name (the JSON contract's) keys
# the second ``check:variant``, the variant its report declares in ``details.variant``.
RENDERERS: dict[str, Renderer] = {
    "embeds": TENSORS,
    "crosscheck": TENSORS,
    "crosscheck-reloaded": TENSORS,  # crosscheck's second pass, after save and reload
    "crosscheck-source": TENSORS,  # an export's source against PyTorch
    "export-vs-source": TENSORS,  # an export against its source
    "gradients-embeds": GRADIENTS,
    "gradients": GRADIENTS,
    "modes": _tensor_check(modes.render_modes),
    "generate": Renderer(
        generation.render_generation, generation.verdict, generation.headline, generation.rows
    ),
    "diagnose": _details_check(sections.render_diagnose, sections.diagnose_verdict),
    "embeddings": _details_check(sections.render_embeddings, sections.embeddings_verdict),
    "positions": _details_check(sections.render_positions, sections.positions_verdict),
    # one artefact on each kernel set: the verdict names the runs that part
    "runtimes": Renderer(
        runtimes.render_runtimes, runtimes.verdict, runtimes.verdict, runtimes.rows
    ),
    "backends": _backends(backends.render_backends, backends.verdict, backends.rows),
    # --quantize, or a quantised file: the backends against each other on the quantised
    # model, and the budget against the float model (cross_backend/quantised.py)
    "backends:quantised": _backends(
        backends.render_quantised, backends_quantised.quantised_verdict, backends.quantised_rows
    ),
}


def renderer_key(report: Report) -> str:
    """``report.check``, or ``check:variant`` where the report declares a variant."""
    variant = report.details.get("variant")
    return f"{report.check}:{variant}" if variant else report.check


def renderer_for(report: Report) -> Renderer:
    """The renderer registered for the report's check (and variant); a check of your
    own gets the tensor checks' (its comparisons and layers are what it has to show)."""
    return RENDERERS.get(renderer_key(report), TENSORS)


@runtime_checkable
class Summarised(Protocol):
    """A run whose result is a summary rather than a :class:`Report` (a sweep's
    ``SweepResult``): it renders itself, as its command prints it."""

    def text(self, *, verbose: bool = False) -> str: ...


def render(report: Report | Summarised, *, verbose: bool = False) -> str:
    """The text report of any check (``tfparity.render``): what its command prints;
    ``verbose`` adds every failure's block where the check has them. A sweep's result
    prints its summary, as ``tfparity sweep`` does."""
    if isinstance(report, Summarised):
        return report.text(verbose=verbose)
    return renderer_for(report).text(report, verbose=verbose)


def verdict(report: Report) -> str:
    """``PASS <check>: ...`` or ``FAIL <check>: ...``: the text report's last line."""
    return renderer_for(report).verdict(report)


def assertion_message(reports: list[Report], where: str) -> str:
    """A failed assertion helper's message, the one builder for every check: the first
    failed report's headline (pytest's one-line summary shows it) and rows, each check's
    own (:class:`Renderer`), then one line per other failed report, then ``where``: the
    last line, saying where the full report is."""
    failed = [r for r in reports if not r.passed] or reports[:1]
    first = renderer_for(failed[0])
    lines = [first.headline(failed[0]), *first.rows(failed[0])]
    lines += [f"also {renderer_for(r).headline(r)}" for r in failed[1:]]
    return "\n".join([*lines, where])


__all__ = [
    "RENDERERS",
    "Divergence",
    "Renderer",
    "Report",
    "assertion_message",
    "render",
    "renderer_for",
    "renderer_key",
    "verdict",
]
