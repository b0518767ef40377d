"""Running a sweep: corpus -> tokenized items -> length buckets -> compiled runs ->
per-item verdicts appended to ``results.jsonl`` -> ``summary.json``.

Memory stays flat in the corpus size: the corpus is read lazily, at most one chunk of
tokenized items and ``batch_size - 1`` items per bucket wait at a time, results go to
disk as each batch finishes, and resume keeps one byte per corpus item.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import NoneType
from typing import Any

from .._version import __version__
from ..errors import TfparityError
from .checks import CHECKS
from .corpus import DEFAULT_CORPUS, CorpusInfo, check_shard, iter_items, scan
from .distribution import refuse_per_position_terms
from .engine import EngineStart, SweepEngine
from .generate import GENERATE, check_generate_options
from .local import LocalEngine
from .options import SweepOptions, sweep_referee
from .progress import Progress
from .ray_engine import RayEngine, RayOptions
from .results import (
    MANIFEST,
    RESULTS,
    SUMMARY,
    ResultsWriter,
    differences,
    iter_results,
    read_done,
    read_manifest,
    write_json,
)
from .summary import summarise, sweep_passed

# The engines, by the type of SweepOptions.engine: a dict, so that an engine (or a test's
# wrapper of one) is added by its options' type, without a branch here.
ENGINES: dict[type, EngineStart] = {
    NoneType: LocalEngine.start,  # engine=None: this process
    RayOptions: RayEngine.start,
}


@dataclass
class SweepResult:
    summary: dict
    out: Path

    @property
    def passed(self) -> bool:
        return sweep_passed(self.summary)

    def text(self, *, verbose: bool = False, strict: bool = False) -> str:
        """What ``tfparity sweep`` prints (``tfparity.render(result)``); the full
        figures are in summary.json, so ``verbose`` adds nothing."""
        from ..report.sweep import render_summary

        return render_summary(self.summary, str(self.out), strict=strict)


def default_checks() -> tuple[str, ...]:
    from ..adapters.runtime.imports import torch_available

    return ("embeds", "crosscheck") if torch_available() else ("embeds",)


def resolve_checks(checks: tuple[str, ...] | None, generate: int | None = None) -> tuple[str, ...]:
    """The checks to run: ``checks`` (default: embeds, plus crosscheck with torch), then
    generate with ``--generate`` (alone when ``checks`` is not given)."""
    if checks:
        chosen = tuple(checks)
    else:
        chosen = () if generate is not None else default_checks()
    unknown = [c for c in chosen if c not in CHECKS]
    if unknown or len(set(chosen)) != len(chosen):
        how = " (generation runs with --generate N, not --checks)" if GENERATE in unknown else ""
        raise TfparityError(
            f"Unknown or repeated check in --checks: {', '.join(unknown) or ','.join(chosen)}. "
            f"Known: {', '.join(CHECKS)}{how}."
        )
    return chosen + ((GENERATE,) if generate is not None else ())


def run_sweep(
    model: Any,
    texts: str | Path | None = None,
    out: str | Path = "tfparity-sweep",
    options: SweepOptions = SweepOptions(),
    *,
    pt: Any = None,
) -> SweepResult:
    """Sweep ``model`` (a MODEL spec or a :class:`TFModel`) over the corpus ``texts``.

    ``pt``: the PyTorch reference for the cross-check (a spec or PTModel); by default
    loaded from the model's own spec, so a broken TFModel is checked against correct
    weights (:func:`tfparity.orchestration.reference_for`).
    """
    checks = resolve_checks(options.checks, options.generate)
    if options.batch_size < 1:
        raise TfparityError(f"--batch-size must be at least 1 (got {options.batch_size}).")
    if options.pt_config and not {"crosscheck", "generate"} & set(checks):
        raise TfparityError(
            "--pt-config changes the PyTorch reference of the cross-check and of "
            "--generate: add crosscheck (or --generate N)."
        )
    _check_kl_budget(options.kl_budget, checks)
    options = replace(options, referee=sweep_referee(options.referee))  # lazy: calibrated
    start_engine = ENGINES.get(type(options.engine))
    if start_engine is None:
        known = ", ".join("None" if t is NoneType else t.__name__ for t in ENGINES)
        raise TfparityError(
            f"SweepOptions.engine must be one of {known} (got {type(options.engine).__name__})."
        )
    info = scan(texts or DEFAULT_CORPUS)
    check_shard(options.shard, info)
    execution = _execution(options, checks, info.items, model)
    if options.generate is not None:
        check_generate_options(options.generate, checks, execution, options.tolerance)
    out = Path(out)
    name = model if isinstance(model, str) else model.name
    manifest = _manifest(name, checks, info, options, pt)
    _prepare_out(out, manifest, options)

    done, already = read_done(out / RESULTS, info.items)
    progress = Progress(total=options.shard.size(info.items) - already, mode=options.progress)
    loading = time.perf_counter()
    torch = " and PyTorch" if {"crosscheck", GENERATE} & set(checks) else ""
    progress.stage(f"loading {name} (starting TensorFlow{torch}, reading the weights)")
    source: SweepEngine = start_engine(model, checks, pt, options, execution)
    try:
        start = time.perf_counter()
        manifest["top1_note"] = {c: _top1_note(c, source.top1_note) for c in checks}
        _check_logits(options.kl_budget, checks, source.top1_note)
        write_json(out / MANIFEST, manifest)
        tracing = "" if execution.runner_kind == "eager" else ", tracing the model"
        progress.stage(f"first batch ({execution.runner_kind}{tracing})")
        writer = ResultsWriter.open(out / RESULTS)
        written, batches = 0, 0
        try:
            items = (i for i in iter_items(info, options.shard) if not done[i.index])
            for records in source.records(items):
                for record in records:
                    writer.write(record)
                written += len(records)
                batches += 1
                progress.update(len(records))
        finally:
            writer.close()
            progress.close()
        seconds = time.perf_counter() - start  # tracing included, loading not
        facts = source.run_facts()
    finally:
        source.close()
    summary = summarise(
        iter_results(out / RESULTS),
        manifest,
        expected_items=options.shard.size(info.items),
        worst=options.worst,
    )
    summary["run"] = {
        "shard": str(options.shard),
        "resumed_with": already if options.resume else None,
        "items_this_run": written,
        "batches": batches,
        "batch_size": options.batch_size,
        "load_seconds": round(start - loading, 3),
        "seconds": round(seconds, 3),
        "items_per_second": round(written / seconds, 2) if seconds > 0 else None,
        **facts,
        **({"pt_config": options.pt_config} if options.pt_config else {}),
    }
    write_json(out / SUMMARY, summary)
    return SweepResult(summary, out)


def _check_kl_budget(limits: Any, checks: tuple[str, ...]) -> None:
    """Refuse (exit 2), before any model loads, a ``--kl-budget`` that no check of this
    sweep could judge, or whose terms need every position's KL."""
    if not limits:
        return
    refuse_per_position_terms(limits)
    if not {"crosscheck", GENERATE} & set(checks):
        raise TfparityError(
            "--kl-budget judges logits compared with PyTorch: the cross-check's LM head "
            "or --generate's teacher-forced steps; add crosscheck to --checks (or "
            "--generate N), or drop it."
        )


def _check_logits(limits: Any, checks: tuple[str, ...], note: str | None) -> None:
    """Refuse (exit 2), before any item runs, a ``--kl-budget`` on a cross-check with no
    logits (no LM head) and no generate check beside it."""
    if limits and note and GENERATE not in checks:
        raise TfparityError(
            f"--kl-budget judges the cross-check's logits, and this model gives none: {note}."
        )


def _top1_note(check: str, note: str | None) -> str | None:
    """Why a check has no top-1 figures: the positions check measures none; the generate
    check always has them (its model has an LM head); the others, as the engine says."""
    if check == "positions":
        return "not measured by the positions check"
    return None if check == GENERATE else note


def _execution(options: SweepOptions, checks: tuple[str, ...], items: int, model: Any) -> Any:
    """The sweep's ExecutionOptions (default: graph, float32; eager for a model that
    runs eagerly only, see :func:`~tfparity.orchestration.compiles`), refused (exit 2)
    where a check cannot judge its precision."""
    from ..adapters.runtime.execution_options import ExecutionOptions
    from ..orchestration import compiles

    execution = options.execution or ExecutionOptions(graph=compiles(model))
    execution = execution.settle(-(-items // options.batch_size))
    if execution.precision != "fp32" and "positions" in checks:
        raise TfparityError(
            f"The positions check judges equivariance with a fixed float32 tolerance "
            f"(1e-4), which --precision {execution.precision} cannot meet: sweep it "
            "with --precision fp32, or leave positions out of --checks."
        )
    return execution


def _manifest(
    name: str, checks: tuple[str, ...], info: CorpusInfo, options: SweepOptions, pt: Any = None
) -> dict:
    tol = options.tolerance
    manifest = {
        "tfparity_version": __version__,
        "model": name,
        "reference": _reference(pt),
        "checks": list(checks),
        "corpus": info.to_dict(),
        "corpus_sha256": info.sha256,
        "shard": str(options.shard),
        "options": {
            "tolerance": None if tol is None else {"atol": tol.atol, "rtol": tol.rtol},
            "padding_side": options.padding_side,
            "truncate": options.truncate,
            "seed": options.seed,
            "precision": options.execution.precision if options.execution else "fp32",
            # A reference other than the checkpoint's (absent: its own, as before).
            **({"pt_config": options.pt_config} if options.pt_config else {}),
            # The export's signature (absent: its default, so older sweeps still resume).
            **({"signature": options.signature} if options.signature else {}),
        },
    }
    if options.kl_budget:  # not part of the identity: a resume may judge another budget
        manifest["kl_budget"] = ",".join(str(limit) for limit in options.kl_budget)
    if options.generate is not None:  # only then: older sweeps' outputs still resume
        manifest["options"]["generate"] = options.generate
    return manifest


def _reference(pt: Any) -> str | None:
    """How run.json names the PyTorch reference given (None: the model's own checkpoint).
    Part of a run's identity: a resume against another reference would mix two runs'
    verdicts."""
    from ..adapters.interfaces.sides import ReferenceBase

    if pt is None or isinstance(pt, str):
        return pt
    return pt.name if isinstance(pt, ReferenceBase) else type(pt).__name__


def _prepare_out(out: Path, manifest: dict, options: SweepOptions) -> None:
    """Refuse to mix two runs' results in one directory (exit 2)."""
    if options.resume and options.overwrite:
        raise TfparityError(
            "--resume keeps the results in --out, --overwrite discards them: give one."
        )
    if out.exists() and not out.is_dir():
        raise TfparityError(f"--out {out} exists and is not a directory.")
    out.mkdir(parents=True, exist_ok=True)
    old = read_manifest(out)
    results = out / RESULTS
    has_results = results.exists() and results.stat().st_size > 0
    if options.overwrite:
        for name in (RESULTS, SUMMARY, MANIFEST):
            (out / name).unlink(missing_ok=True)
        return
    if old is None and has_results:
        raise TfparityError(f"{out} holds {RESULTS} but no {MANIFEST}; not a sweep's.")
    if old is None:
        return
    diff = differences(old, manifest)
    if old.get("shard") != manifest["shard"]:
        diff.append(f"shard {old.get('shard')} vs {manifest['shard']}")
    if diff:
        raise TfparityError(
            f"{out} holds results of another sweep ({'; '.join(diff)}). Use another "
            "--out, or --overwrite to replace them."
        )
    if has_results and not options.resume:
        raise TfparityError(
            f"{out} already holds results of this sweep. Pass --resume to finish it, or "
            "--overwrite to start again."
        )
