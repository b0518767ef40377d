"""How to sweep: the options of :func:`~tfparity.sweep.runner.run_sweep`, in a module of
their own so that the engines import them without importing the runner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..adapters.runtime.execution_options import ExecutionOptions
from ..compare import Tolerance
from ..compare.bootstrap import Limit
from ..errors import TfparityError
from .corpus import Shard
from .summary import WORST


@dataclass(frozen=True)
class SweepOptions:
    """How to sweep."""

    checks: tuple[str, ...] | None = None  # None: embeds, plus crosscheck with torch
    batch_size: int = 32
    shard: Shard = Shard()
    resume: bool = False
    overwrite: bool = False
    tolerance: Tolerance | None = None
    padding_side: str | None = None
    truncate: bool = False
    seed: int = 0
    progress: str = "auto"  # auto, bar, lines, none
    worst: int = WORST
    # Device, eager/graph/XLA, precision. None: graph (one trace per path, any shape),
    # float32, TensorFlow's own placement.
    execution: ExecutionOptions | None = None
    # The cross-check's float64 referee: "calibrated" runs float64 only for the items
    # whose verdict margins calibrated on float64 rows cannot settle (see
    # sweep.calibrated_referee.CalibratedReferee); "full" for every item. The verdicts
    # are the same, so a resume or a merge may mix them. "lazy", the cross-check's word, is read as
    # "calibrated": the cross-check's exact bound needs float64 on part of what it
    # judges, and a sweep judges each item alone (docs/sweep.md).
    referee: str = "calibrated"
    # Which engine runs the batches, by its options' type (runner.ENGINES): None, in
    # this process (local.LocalEngine); a ray_engine.RayOptions, on Ray actors.
    engine: Any = None
    # --generate N: N new greedy tokens per item, TF generate against PyTorch generate
    # (the "generate" check, sweep.generate); None: no generation. Without ``checks`` it
    # runs alone.
    generate: int | None = None
    # The cross-check's PyTorch reference built with these config fields changed
    # (--pt-config, see adapters.reference_config); None: the checkpoint's own config.
    pt_config: dict[str, Any] | None = None
    # --signature: the signature an export runs (None: serving_default, else its only one).
    signature: str | None = None
    # --kl-budget: limits on the logits' distribution metrics, judged per check by a
    # bootstrap over items (sweep.distribution); None: the metrics are reported only.
    kl_budget: tuple[Limit, ...] | None = None


SWEEP_REFEREES = ("calibrated", "full")
# The cross-check's name, accepted by the sweep for what it meant there before: the
# sweep's own algorithm (calibrated margins), not the cross-check's exact bound.
REFEREE_ALIASES = {"lazy": "calibrated"}


def sweep_referee(mode: str) -> str:
    """``mode`` as the sweep names it (``lazy`` -> ``calibrated``); exit 2 on another."""
    mode = REFEREE_ALIASES.get(mode, mode)
    if mode not in SWEEP_REFEREES:
        raise TfparityError(f"--referee must be calibrated or full (got {mode!r}).")
    return mode
