"""Reports and their renderings (text, JSON, HTML); numpy-free and framework-free.

Each kind of report is rendered by the :class:`Renderer` registered for its
``Report.check`` in :data:`RENDERERS`: its text, its verdict line and the pytest
assertion message. :func:`render` (``tfparity.render``), the HTML page and the
assertion helpers dispatch through it, so that a report is never told apart by the
keys its details happen to hold. A check of your own (not registered) is rendered as a
tensor check: its comparisons, layers and verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from ..results import Divergence, Report
from . import backends, brief, generation, gradients, modes, sections, text


@dataclass(frozen=True)
class Renderer:
    """How one kind of report reads: ``text(report, verbose=...)``, the whole report;
    ``verdict(report)``, its ``PASS``/``FAIL`` line; ``message(reports, full_report)``,
    what a failed assertion helper says, built from the report's rows and divergence
    (``full_report``: its last line, where the whole report is). ``layer_x_backend``:
    its ``details.layers`` is the layer x backend table of ``tfparity backends``, not
    the cross-check's per-layer table."""

    text: Callable[..., str]
    verdict: Callable[[Report], str]
    message: Callable[[list[Report], str], str]
    layer_x_backend: bool = False


def _sections(render: Callable[[Report], str]) -> Callable[..., str]:
    """A renderer without a verbose form (diagnose, embeddings, positions): every fact
    is always shown."""

    def text_of(report: Report, *, verbose: bool = False) -> str:
        return render(report)

    return text_of


def _tensor_check(render: Callable[..., str] = text.render) -> Renderer:
    """A check whose report is tensor comparisons (with the cross-check's layer table)."""
    return Renderer(render, text.verdict_line, brief.assertion_message)


def _details_check(render: Callable[[Report], str], verdict: Callable[[Report], str]) -> Renderer:
    """A check whose report is its details' tables and whose verdict says what failed."""
    return Renderer(_sections(render), verdict, partial(brief.assertion_message, verdict=verdict))


TENSORS = _tensor_check()
GRADIENTS = _tensor_check(gradients.render_gradients)

# Report.check -> its renderer: every check a command or an API function writes.
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
        generation.render_generation, generation.verdict, generation.assertion_message
    ),
    "diagnose": _details_check(sections.render_diagnose, sections.diagnose_verdict),
    "embeddings": _details_check(sections.render_embeddings, sections.embeddings_verdict),
    "positions": _details_check(sections.render_positions, sections.positions_verdict),
    "backends": Renderer(
        backends.render_report, backends.verdict, backends.assertion_message, layer_x_backend=True
    ),
}


def renderer_for(report: Report) -> Renderer:
    """The renderer registered for ``report.check``; a check of your own gets the
    tensor checks' (its comparisons and layers are what it has to show)."""
    return RENDERERS.get(report.check, TENSORS)


def render(report: Report, *, verbose: bool = False) -> str:
    """The text report of any check (``tfparity.render``): what its command prints;
    ``verbose`` adds every failure's block where the check has them."""
    return renderer_for(report).text(report, verbose=verbose)


def verdict(report: Report) -> str:
    """``PASS <check>: ...`` or ``FAIL <check>: ...``: the text report's last line."""
    return renderer_for(report).verdict(report)


def assertion_message(reports: list[Report], full_report: str) -> str:
    """A failed assertion helper's message (the first failed report's check says how it
    reads); ``full_report``: its last line, where the whole report is."""
    failed = next((r for r in reports if not r.passed), reports[0])
    return renderer_for(failed).message(reports, full_report)


__all__ = [
    "RENDERERS",
    "Divergence",
    "Renderer",
    "Report",
    "assertion_message",
    "render",
    "renderer_for",
    "verdict",
]
