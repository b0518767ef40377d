"""``tfparity backends``: one Keras 3 model on each Keras backend, each in its own
process, judged in this (framework-free) process against the Keras float64 referee and,
for a keras-hub port of a Hugging Face checkpoint, against HF PyTorch at float64 too.

The parent side lives here: :mod:`.run` (one launch path, float or quantised),
:mod:`.prepare` (the preparing step, run in the TensorFlow worker), and the judging:
:mod:`.judge`, :mod:`.quantised`, :mod:`.gradients`, :mod:`.hf`, :mod:`.hints`. The
child process and its pool are :mod:`tfparity.adapters.keras_backends`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..results import Report
from .run import BackendsRequest, run_request

if TYPE_CHECKING:
    from ..adapters.keras_backends.workers import BackendWorkers


def backends(
    model: str,
    *,
    backends: Sequence[str] | None = None,
    imports: Sequence[str] = (),
    random: int = 2,
    seq_len: int = 8,
    inputs: str | None = None,
    seed: int = 0,
    referee_backend: str | None = None,
    ceiling: float | None = None,
    pt: str | None = None,
    texts: Sequence[str] | None = None,
    gradients: bool = False,
    quantize: str | None = None,
    kl_budget: str | None = None,
    jobs: int | None = None,
    workers: BackendWorkers | None = None,
) -> Report:
    """One Keras 3 model on each Keras backend (``backends``: default every installed
    one), each in its own process, every layer's output judged against a float64 run of
    the same model (on ``referee_backend``: default TensorFlow, the one backend on which
    Keras 3 computes float64 as asked). ``model``: a ``.keras`` file, a
    ``keras-hub:<SPEC>`` (also judged against Hugging Face PyTorch at float64: ``pt``,
    default the spec's own checkpoint) or a callable ``module:function`` returning a
    built Keras 3 model. ``imports``: modules that register the model's custom layers,
    imported first in every process. Inputs: ``inputs`` (an npz, one array per model
    input), ``texts`` (a keras-hub spec's tokenizer), else ``random`` rows of
    ``seq_len`` seeded token ids. ``gradients``: also each backend's gradients of a
    scalar seeded by ``seed`` w.r.t. every layer output and weight, judged the same way
    backwards. ``quantize``: Keras-quantise the model once on TensorFlow and check that
    every backend computes the same quantised model: the backends against each other at
    every layer, within ``ceiling``, and apart from that each backend's output against the
    float model's float64 referee by the mode's budgets (``kl_budget``, e.g.
    ``"kl_mean=0.015"``, replaces its distribution budget); a file already quantised is
    checked so without it, and without a budget (docs/backends.md). A mixed-precision
    model's half-precision layers are held to bounds in units of their rounding.
    ``jobs``: at most that many backend processes at once (default: every one; 1: one
    after another).
    ``workers``: a :class:`tfparity.BackendWorkers` whose warm processes are reused
    across calls (each import paid once for many models); None: started and ended
    here."""
    from ..compare.bootstrap import parse_limits

    limits = parse_limits(kl_budget) if kl_budget else None  # exit 2 before any process
    return run_request(
        BackendsRequest(
            model,
            backends,
            tuple(imports),
            random,
            seq_len,
            inputs,
            seed,
            referee_backend,
            ceiling,
            pt,
            texts,
            gradients,
            quantize,
            limits,
            jobs,
        ),
        workers,
    )


__all__ = ["BackendsRequest", "backends", "run_request"]
