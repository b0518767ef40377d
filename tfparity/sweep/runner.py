"""Running a sweep: corpus -> tokenized items -> length buckets -> compiled runs ->
per-item verdicts appended to ``results.jsonl`` -> ``summary.json``.

Memory stays flat in the corpus size: the corpus is read lazily, at most one chunk of
tokenized items and ``batch_size - 1`` items per bucket wait at a time, results go to
disk as each batch finishes, and resume keeps one byte per corpus item.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._version import __version__
from ..compare import Tolerance
from ..errors import TfparityError
from . import results as res
from .bucketing import Bucketer, PaddedBatch, bucket_lengths
from .checks import CHECKS, BatchContext, SweepChecks
from .corpus import DEFAULT_CORPUS, CorpusInfo, Item, Shard, check_shard, iter_items, scan
from .encode import TooLong, encode
from .progress import Progress
from .summary import WORST, summarise


@dataclass(frozen=True)
class SweepOptions:
    """How to sweep. ``max_items`` stops after that many items are written, without
    flushing the buckets (a simulated kill, for tests and benchmarks)."""

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
    max_items: int | None = None
    worst: int = WORST
    # An adapters.execution.ExecutionOptions: device, eager/graph/XLA, precision.
    # None: graph (one trace per path, any shape), float32, TensorFlow's own placement.
    execution: Any = None
    # The cross-check's float64 referee: "lazy" runs float64 only for the items whose
    # verdict it can change (see sweep.lazy_referee.LazyReferee); "full" for every item. The
    # verdicts are the same, so a resume or a merge may mix them.
    referee: str = "lazy"
    # A sweep.ray_engine.RayOptions: run on Ray actors (None: in this process).
    engine: Any = None


@dataclass
class SweepResult:
    summary: dict
    out: Path

    @property
    def passed(self) -> bool:
        return self.summary["failed"] == 0 and self.summary["complete"]


def default_checks() -> tuple[str, ...]:
    from ..adapters.runtime import torch_available

    return ("embeds", "crosscheck") if torch_available() else ("embeds",)


def resolve_checks(checks: tuple[str, ...] | None) -> tuple[str, ...]:
    chosen = tuple(checks) if checks else default_checks()
    unknown = [c for c in chosen if c not in CHECKS]
    if unknown or len(set(chosen)) != len(chosen):
        raise TfparityError(
            f"Unknown or repeated check in --checks: {', '.join(unknown) or ','.join(chosen)}. "
            f"Known: {', '.join(CHECKS)}."
        )
    return chosen


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
    checks = resolve_checks(options.checks)
    if options.batch_size < 1:
        raise TfparityError(f"--batch-size must be at least 1 (got {options.batch_size}).")
    if options.referee not in ("lazy", "full"):
        raise TfparityError(f"--referee must be lazy or full (got {options.referee!r}).")
    info = scan(texts or DEFAULT_CORPUS)
    check_shard(options.shard, info)
    execution = _execution(options, checks, info.items, model)
    out = Path(out)
    name = model if isinstance(model, str) else model.name
    manifest = _manifest(name, checks, info, options, pt)
    _prepare_out(out, manifest, options)

    loading = time.perf_counter()
    if options.engine is None:
        source: Any = _Setup.load(model, checks, pt, options, execution)
    else:
        from .ray_engine import RayEngine

        source = RayEngine.start(model, checks, pt, options, execution)
    try:
        start = time.perf_counter()
        manifest["top1_note"] = {
            c: "not measured by the positions check" if c == "positions" else source.top1_note
            for c in checks
        }
        res.write_json(out / res.MANIFEST, manifest)
        done, already = res.read_done(out / res.RESULTS, info.items)
        todo = options.shard.size(info.items) - already
        progress = Progress(total=todo, mode=options.progress)
        writer = res.ResultsWriter.open(out / res.RESULTS)
        written, batches = 0, 0
        try:
            items = (i for i in iter_items(info, options.shard) if not done[i.index])
            for records in source.records(items):
                for record in records:
                    writer.write(record)
                written += len(records)
                batches += 1
                progress.update(len(records))
                if options.max_items is not None and written >= options.max_items:
                    break
        finally:
            writer.close()
            progress.close()
        seconds = time.perf_counter() - start  # tracing included, loading not
        facts = source.run_facts()
    finally:
        source.close()
    summary = summarise(
        res.iter_results(out / res.RESULTS),
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
    }
    res.write_json(out / res.SUMMARY, summary)
    return SweepResult(summary, out)


def _execution(options: SweepOptions, checks: tuple[str, ...], items: int, model: Any) -> Any:
    """The sweep's ExecutionOptions (default: graph, float32; eager for a model that
    runs eagerly only, see :func:`~tfparity.orchestration.compiles`), refused (exit 2)
    where a check cannot judge its precision."""
    from ..adapters.execution import ExecutionOptions
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
    return {
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
            "precision": getattr(options.execution, "precision", "fp32"),
        },
    }


def _reference(pt: Any) -> str | None:
    """How run.json names the PyTorch reference given (None: the model's own checkpoint).
    Part of a run's identity: a resume against another reference would mix two runs'
    verdicts."""
    if pt is None or isinstance(pt, str):
        return pt
    return getattr(pt, "name", None) or type(pt).__name__


def _prepare_out(out: Path, manifest: dict, options: SweepOptions) -> None:
    """Refuse to mix two runs' results in one directory (exit 2)."""
    if options.resume and options.overwrite:
        raise TfparityError(
            "--resume keeps the results in --out, --overwrite discards them: give one."
        )
    if out.exists() and not out.is_dir():
        raise TfparityError(f"--out {out} exists and is not a directory.")
    out.mkdir(parents=True, exist_ok=True)
    old = res.read_manifest(out)
    results = out / res.RESULTS
    has_results = results.exists() and results.stat().st_size > 0
    if options.overwrite:
        for name in (res.RESULTS, res.SUMMARY, res.MANIFEST):
            (out / name).unlink(missing_ok=True)
        return
    if old is None and has_results:
        raise TfparityError(f"{out} holds {res.RESULTS} but no {res.MANIFEST}; not a sweep's.")
    if old is None:
        return
    diff = res.differences(old, manifest)
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


@dataclass
class _Setup:
    """Everything loaded once per process: the TF model and its runner (compiled once
    per path; per bucket shape under XLA), one PyTorch model (and its float64 copy),
    the LM head, the bucketer settings."""

    tf_model: Any
    runner_model: Any  # adapters.execution.ExecutedModel
    checks: tuple[str, ...]
    runner: SweepChecks
    limit: int | None
    options: SweepOptions
    top1_note: str | None = None
    _padding_side: str = field(default="right")

    @classmethod
    def load(
        cls, model: Any, checks: tuple[str, ...], pt: Any, options: SweepOptions, execution: Any
    ) -> _Setup:
        from ..orchestration import bound_to_reference, executed, load_model, reference_for
        from ..validation import same_architecture

        tf_model = bound_to_reference(load_model(model), pt)  # a keras-hub preset: --pt's
        pt_model = None
        if "crosscheck" in checks:
            pt_model = reference_for(model, pt).in_precision(execution.precision)
            same_architecture(tf_model, pt_model)  # as the cross-check refuses it: exit 2
        head, note = _load_head(tf_model)
        runner_model = executed(tf_model, execution)
        runner = SweepChecks(
            runner_model,
            tf_model,
            pt_model,
            head,
            tolerance=options.tolerance,
            seed=options.seed,
            referee_mode=options.referee,
        )
        side = options.padding_side or getattr(tf_model.tokenizer, "padding_side", "right")
        return cls(tf_model, runner_model, checks, runner, _limit(tf_model), options, note, side)

    def records(self, items: Iterator[Item]) -> Iterator[list[dict]]:
        """One list of result records per batch (or per item too long to run)."""
        for unit in padded_stream(self.encoding(), items, self.options):
            yield unit if isinstance(unit, list) else self._run(unit)

    def encoding(self) -> Encoding:
        """What the driver needs to tokenize and bucket items as this process does."""
        return Encoding(
            tokenizer=self.tf_model.tokenizer,
            limit=self.limit,
            pad_id=self.tf_model.pad_token_id or 0,
            padding_side=self._padding_side,
            with_types=bool(getattr(self.tf_model.config, "type_vocab_size", 0)),
            # XLA compiles once per input shape: give it a few fixed bucket shapes.
            fixed_shapes=self.runner_model.execution.xla,
        )

    def run_facts(self) -> dict:
        """The run facts of summary.json's ``run`` that this process knows."""
        return {
            "traces": self.runner_model.traces,
            "traces_by_path": self.runner_model.traces_by_path(),
            **self.runner_model.execution.describe(),
            "buckets": bucket_lengths(self.limit),
            "referee": self.runner.referee_stats(),
        }

    def close(self) -> None:
        pass

    def _run(self, padded: PaddedBatch) -> list[dict]:
        ctx = BatchContext(padded, self.runner_model.run(_without_positions(padded.batch)))
        per_check = {name: self.runner.run(name, ctx) for name in self.checks}
        records = []
        for r, item in enumerate(padded.items):
            results = {name: per_check[name][r] for name in self.checks}
            records.append(
                {
                    "index": item.index,
                    "id": item.id,
                    "text": item.text,
                    "tokens": int(padded.batch.attention_mask[r].sum()),
                    "bucket": padded.bucket,
                    "passed": all(x.passed is not False for x in results.values()),
                    "checks": {name: x.to_dict() for name, x in results.items()},
                }
            )
        return records


@dataclass
class Encoding:
    """The tokenizer and bucketing settings of a loaded model (picklable, for a driver
    that deals batches to workers)."""

    tokenizer: Any
    limit: int | None
    pad_id: int
    padding_side: str
    with_types: bool
    fixed_shapes: bool = False


def padded_stream(
    enc: Encoding, items: Iterator[Item], options: SweepOptions
) -> Iterator[PaddedBatch | list[dict]]:
    """Items -> bucketed batches (full ones as they fill, then the rest), with the
    records of items too long to run, in the order a single process makes them."""
    bucketer = Bucketer(
        options.batch_size,
        enc.limit,
        enc.pad_id,
        enc.padding_side,
        with_types=enc.with_types,
        fixed_shapes=enc.fixed_shapes,
    )
    for e in encode(enc.tokenizer, items, limit=enc.limit, truncate=options.truncate):
        if isinstance(e, TooLong):
            yield [_skipped_record(e)]
            continue
        yield from bucketer.add(e)
    yield from bucketer.flush()


def _skipped_record(e: TooLong) -> dict:
    return {
        "index": e.item.index,
        "id": e.item.id,
        "text": e.item.text,
        "tokens": e.tokens,
        "passed": None,
        "skipped": e.reason,
        "checks": {},
    }


def _limit(tf_model: Any) -> int | None:
    tok_max = getattr(tf_model.tokenizer, "model_max_length", None)
    found = [n for n in (tf_model.limits.max_positions, tok_max) if n and 0 < n < 10**6]
    return min(found) if found else None


def _without_positions(batch: Any) -> Any:
    return batch if batch.position_ids is None else replace(batch, position_ids=None)


def _load_head(tf_model: Any) -> tuple[Any, str | None]:
    """The LM head as a function ``hidden -> logits`` and, without one, why."""
    from ..adapters.lm_head import checkpoint_has_head, find_head
    from ..adapters.tf_model import TFModel

    headless = getattr(tf_model, "headless_reason", None)  # a keras-hub backbone
    if headless:
        return None, headless
    try:
        has = checkpoint_has_head(tf_model, tf_model.name)
    except Exception:  # a model held in memory with an unusual config
        has = False
    if not has:
        return None, (
            f"{tf_model.name} has no LM head in its checkpoint (config.architectures "
            f"{getattr(tf_model.config, 'architectures', None)}), so top-1 token agreement "
            "cannot be measured"
        )
    head = find_head(TFModel.load(tf_model.name, head=True))
    if head is None or head.logits is None:
        return None, f"the LM head of {tf_model.name} cannot be applied to hidden states"
    return head.logits, None
