"""How ``tfparity.backends`` assembles a run for each kind of MODEL: a ``.keras`` file
as it is; a ``keras-hub:<SPEC>`` or a callable ``module:function`` first made into one
``.keras`` file by a preparing process (:mod:`.prepare`)
so that every backend loads the same weights; then one process per backend, judged in
this (framework-free) process against the Keras float64 referee and, for a keras-hub
port of a Hugging Face checkpoint, against HF PyTorch at float64 too."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TfparityError
from ..results import Report

if TYPE_CHECKING:
    from ..adapters.keras_backends.workers import BackendWorkers
    from .processes import Processes


@dataclass(frozen=True)
class BackendsRequest:
    """What the user asked for (the API's arguments, validated by the callee)."""

    model: str
    backends: Sequence[str] | None = None
    imports: Sequence[str] = ()
    random: int = 2
    seq_len: int = 8
    inputs: str | None = None
    seed: int = 0
    referee_backend: str | None = None
    ceiling: float | None = None
    pt: str | None = None
    texts: Sequence[str] | None = None
    gradients: bool = False
    # Keras quantisation mode (int8|int4|float8): quantise once on TensorFlow, every
    # backend runs that quantised file (.quantised); None: run the file as it is.
    quantize: str | None = None
    kl_budget: Sequence[Any] | None = None  # parsed limits replacing the mode's default
    jobs: int | None = None  # backend processes at once; None: as many as cores allow


def run_request(request: BackendsRequest, workers: BackendWorkers | None = None) -> Report:
    """Prepare MODEL by its kind, run every backend, judge (see the module). The
    backends' processes come from ``workers`` (None: started here and ended at the
    end); the first ones start before preparing, so their imports overlap with it."""
    from ..adapters.keras_backends import choose_backends, choose_referee
    from ..adapters.keras_backends.launch import warm_first
    from ..adapters.keras_backends.workers import BackendWorkers
    from .prepare import model_kind, temporary_workdir, worker_imports
    from .processes import Processes

    kind = model_kind(request.model)
    _refuse_for_kind(request, kind)
    _refuse_for_quantize(request)
    if kind == "file":
        from ..adapters.keras_backends.inputs import keras_hub_model, read_config

        # a bad file: exit 2 before any process starts; a keras-hub one: keras_hub imported
        kind = "keras-hub file" if keras_hub_model(read_config(Path(request.model))) else kind
    chosen, notes = choose_backends(request.backends)
    referee = choose_referee(request.referee_backend)
    imports = worker_imports(kind, request.model, tuple(request.imports))
    with temporary_workdir() as tmp, contextlib.ExitStack() as stack:
        pool = workers if workers is not None else stack.enter_context(BackendWorkers())
        processes = Processes(pool, imports)
        warm_first(pool, processes.plan(Path(tmp), chosen, referee), request.jobs)
        return _run(request, kind, Path(tmp), (chosen, referee), notes, processes)


def _refuse_for_quantize(request: BackendsRequest) -> None:
    """What ``--quantize`` cannot be asked with (exit 2 before any process starts)."""
    if request.quantize is not None:
        from ..adapters.keras_hub.quantize import check_mode

        check_mode(request.quantize)
        if request.gradients:
            raise TfparityError(
                "--gradients is not judged on a quantised model: its int8/float8 layers "
                "have no float64 twin to referee the gradients (drop one of them)."
            )
    elif request.kl_budget:
        raise TfparityError(
            "--kl-budget judges a quantised model's logits on `tfparity backends`: give "
            "--quantize int8|int4|float8 with it, or a .keras file already quantised."
        )


def _refuse_for_kind(request: BackendsRequest, kind: str) -> None:
    """Options that only a keras-hub spec takes (exit 2 naming the option)."""
    from .prepare import missing_module

    if kind == "callable" and missing_module(request.model):
        raise TfparityError(missing_module(request.model))
    for module in request.imports:  # a typo exits 2 before any process starts
        if missing_module(module):
            raise TfparityError(f"--import {missing_module(module)}")
    if kind == "keras-hub":
        if request.inputs:
            raise TfparityError(
                "--inputs is for a .keras file or a callable: a keras-hub spec runs on "
                "--random N --seq-len L or --text/--texts, as crosscheck does."
            )
        return
    for given, option in ((request.pt, "--pt"), (request.texts, "--text/--texts")):
        if given:
            raise TfparityError(
                f"`tfparity backends` does not take {option} for a .keras file or a "
                "callable: only a keras-hub spec has a Hugging Face checkpoint and a "
                "tokenizer (give --random N --seq-len L, or --inputs FILE.npz)."
            )


def _run(
    request: BackendsRequest,
    kind: str,
    tmp: Path,
    backends: tuple[tuple[str, ...], str],
    notes: list[str],
    processes: Processes,
) -> Report:
    from ..adapters.keras_backends import run_backends
    from ..adapters.keras_backends.inputs import file_inputs, random_inputs, read_config
    from ..checks.backends import DEFAULT_CEILING, BackendOutputs, check_backends
    from ..compare.judge import Referee
    from .prepare import HubInputs, Prepared, prepare, tokenised_file_inputs

    given = file_inputs(Path(request.inputs)) if request.inputs else None
    hub = HubInputs(request.random, request.seq_len, request.seed, _texts(request.texts))
    if kind == "keras-hub file":  # a keras-hub backbone or task: tokenised, as its spec's
        path = Path(request.model)
        inputs = given or tokenised_file_inputs(
            path, tmp, processes.imports, hub, step=processes.step
        )
        prepared = Prepared(path, inputs, processes.imports)
    elif kind == "file":
        path = Path(request.model)
        inputs = given or random_inputs(
            read_config(path), request.random, request.seq_len, request.seed
        )
        prepared = Prepared(path, inputs, tuple(request.imports))
    else:
        prepared = prepare(
            request.model, kind, tmp, tuple(request.imports), hub, request.pt, step=processes.step
        )
        prepared.inputs = given or prepared.inputs
    if request.quantize or _quantised_file(prepared.path):
        from .quantised import run_quantised

        return run_quantised(request, prepared, tmp, backends, notes, processes)
    chosen, referee = backends
    seed = request.seed if request.gradients else None
    plan = processes.plan(prepared.path, chosen, referee, gradients=seed)
    runs = run_backends(plan, prepared.inputs, request.jobs, processes.workers)
    for note in [*prepared.notes, *(n for run in runs.values() for n in run.notes)]:
        notes += [note] if note not in notes else []
    outputs = BackendOutputs(
        model=str(request.model),
        float32={b: runs[b].outputs["float32"] for b in chosen},
        truth=runs[referee].outputs["float64"],
        referee_backend=referee,
        precision={b: runs[b].precision for b in chosen},
        notes=notes,
        layer_facts={b: runs[b].layer_facts for b in chosen},
        parents={n: p for run in runs.values() for n, p in run.parents.items()},
    )
    ceiling = DEFAULT_CEILING if request.ceiling is None else request.ceiling
    report = check_backends(outputs, ceiling=ceiling)
    if prepared.hf:
        from ..checks.backends_hf import HFReferee, check_against_hf, with_hf

        hf = HFReferee(prepared.reference, prepared.hf, prepared.aliases, prepared.mask)
        report = with_hf(report, check_against_hf(outputs, hf, Referee(), ceiling), hf.label)
    if request.gradients:
        from ..checks.backends_gradients import BackendGradients, add_gradients

        held = BackendGradients.from_runs(runs, chosen, referee, request.seed)
        report = add_gradients(report, held, ceiling=ceiling)
    return report


def _quantised_file(path: Path) -> bool:
    """Whether ``path`` was saved after Keras's ``model.quantize`` (read from its config)."""
    from ..adapters.keras_backends.inputs import quantised_mode, read_config

    return quantised_mode(read_config(path)) is not None


def _texts(texts: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if texts is None else tuple(str(t) for t in texts)


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
    from ..compare.bootstrap import parse_budget

    limits = parse_budget(kl_budget) if kl_budget else None  # exit 2 before any process
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
