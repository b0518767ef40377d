"""How to sweep: the options of :func:`~tfparity.sweep.runner.run_sweep`, in a module of
their own so that the engines import them without importing the runner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..adapters.runtime.execution_options import ExecutionOptions
from ..compare import Tolerance
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
    # The cross-check's float64 referee: "lazy" runs float64 only for the items whose
    # verdict it can change (see sweep.lazy_referee.LazyReferee); "full" for every item. The
    # verdicts are the same, so a resume or a merge may mix them.
    referee: str = "lazy"
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
