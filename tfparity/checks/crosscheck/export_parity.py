"""An export checked three ways in one crosscheck (``--tf EXPORT --source MODEL``): the
export against the model it was exported from, and each of them against PyTorch, so a
failure says whether the export or the port parts (docs/crosscheck.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...adapters.interfaces.sides import TFSide
from ...inputs import Batch
from ...results import Report
from .check import crosscheck
from .export_source import SOURCE_LABEL, check_export_vs_source


def export_parity(
    export: TFSide, source: TFSide, pt_model: Any, batches: Sequence[Batch], options: Any
) -> list[Report]:
    """The export vs its source, the export vs PyTorch, the source vs PyTorch; the
    export's runs are made once and serve the first two."""
    traces = [export.run(b) for b in batches]
    return [
        check_export_vs_source(export, source, batches, options.tolerance, traces, options.budget),
        crosscheck(export, pt_model, batches, options, tf_traces=traces),
        crosscheck(source, pt_model, batches, replace(options, label=SOURCE_LABEL)),
    ]
