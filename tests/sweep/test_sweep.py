"""tfparity sweep: per-item results, summary, bucketing/traces, resume, failures, CLI."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from tfparity.cli import main
from tfparity.errors import TfparityError
from tfparity.sweep import DEFAULT_CORPUS, SweepOptions, run_sweep
from tfparity.sweep.bucketing import Bucketer, bucket_length
from tfparity.sweep.progress import Progress
from tfparity.sweep.results import read_done

N_ITEMS = 30
CHECKS = ("embeds", "crosscheck", "positions")


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The first 30 items of the repo corpus (very short to medium, numbers, quotes)."""
    path = tmp_path_factory.mktemp("corpus") / "corpus30.txt"
    texts = DEFAULT_CORPUS.read_text(encoding="utf-8").splitlines()[:N_ITEMS]
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny(load_tf_model):
    return load_tf_model("tiny:bert")


@pytest.fixture(scope="module")
def baseline(tiny, corpus, tmp_path_factory):
    """One uninterrupted sweep with all three checks."""
    out = tmp_path_factory.mktemp("sweep") / "full"
    options = SweepOptions(checks=CHECKS, batch_size=8, progress="none")
    return run_sweep(tiny, corpus, out, options)


def test_results_lines_one_per_item_with_verdicts(baseline, corpus):
    records = lines(baseline.out / "results.jsonl")
    texts = corpus.read_text(encoding="utf-8").splitlines()
    assert sorted(r["index"] for r in records) == list(range(N_ITEMS))
    for r in records:
        assert r["text"] == texts[r["index"]] and r["id"] == str(r["index"])
        assert r["tokens"] <= r["bucket"] == bucket_length(r["tokens"], 64)
        assert set(r["checks"]) == set(CHECKS) and r["passed"] is True
        # two traced graphs (ids, gathered embeds): equal up to how the kernels fuse them
        assert r["checks"]["embeds"]["max_abs_diff"] <= 1e-6
        assert 0 <= r["checks"]["crosscheck"]["max_abs_diff"] < 1e-4
        top1 = r["checks"]["crosscheck"]["top1"]
        assert top1 == {"agree": r["tokens"], "tokens": r["tokens"]}


def test_summary_fields(baseline):
    s = json.loads((baseline.out / "summary.json").read_text())
    assert s == baseline.summary
    assert (s["items"], s["passed"], s["failed"], s["skipped"]) == (N_ITEMS, N_ITEMS, 0, 0)
    assert s["complete"] is True and s["model"] == "tiny:bert" and s["checks"] == list(CHECKS)
    cross = s["per_check"]["crosscheck"]
    diffs = cross["max_abs_diff"]
    assert 0 <= diffs["p50"] <= diffs["p99"] <= diffs["max"] < 1e-4 and diffs["max"] > 0
    assert cross["top1_agreement"] == 1.0 and cross["top1_tokens"] > N_ITEMS
    assert s["per_check"]["positions"]["top1_agreement"] is None
    assert s["per_check"]["positions"]["top1_note"]
    worst = s["worst_items"]
    assert len(worst) == 10 and all(w["text"] for w in worst)
    ranked = [max(w["max_abs_diff"].values()) for w in worst]
    assert ranked == sorted(ranked, reverse=True)


def test_graph_mode_traces_each_path_once_whatever_the_buckets(baseline):
    run = baseline.summary["run"]
    used = {r["bucket"] for r in lines(baseline.out / "results.jsonl")}
    assert run["batches"] > len(used) > 1  # several buckets, several batches each ...
    assert run["traces_by_path"] == {"ids": 1, "embeds": 1, "positions": 1}  # ... one trace


def test_xla_sweep_compiles_once_per_bucket_and_path_with_dummy_rows_dropped(corpus, tmp_path):
    from tfparity.adapters.runtime.execution_options import ExecutionOptions

    options = SweepOptions(
        checks=("embeds",), batch_size=8, progress="none", execution=ExecutionOptions(xla=True)
    )
    result = run_sweep("tiny:bert", corpus, tmp_path / "xla", options)
    records = lines(tmp_path / "xla" / "results.jsonl")
    used = {r["bucket"] for r in records}
    assert result.passed and sorted(r["index"] for r in records) == list(range(N_ITEMS))
    assert result.summary["run"]["traces_by_path"] == {"ids": len(used), "embeds": len(used)}


def test_bucketer_without_fixed_shapes_holds_real_rows_only(corpus):
    import numpy as np

    from tfparity.sweep.bucketing import Encoded
    from tfparity.sweep.corpus import Item

    b = Bucketer(batch_size=4, limit=64, pad_id=0)
    rows = [
        Encoded(Item(i, str(i), "x"), np.arange(1, 4 + i, dtype=np.int32), None) for i in range(6)
    ]
    full = [pb for e in rows for pb in b.add(e)]
    rest = list(b.flush())
    assert [pb.batch.input_ids.shape for pb in full] == [(4, 8)]  # the bucket's length
    assert [pb.batch.input_ids.shape for pb in rest] == [(2, 8)]  # no dummy rows
    assert rest[0].bucket == 8 and rest[0].batch.attention_mask.sum(axis=1).tolist() == [7, 8]


def test_bucketer_with_fixed_shapes_pads_last_batch_with_masked_dummy_rows(corpus):
    import numpy as np

    from tfparity.sweep.bucketing import Encoded
    from tfparity.sweep.corpus import Item

    b = Bucketer(batch_size=4, limit=64, pad_id=0, fixed_shapes=True)  # as under XLA
    rows = [
        Encoded(Item(i, str(i), "x"), np.arange(1, 4 + i, dtype=np.int32), None) for i in range(5)
    ]
    full = [pb for e in rows for pb in b.add(e)]
    rest = list(b.flush())
    assert [pb.real_rows for pb in full] == [4] and [pb.real_rows for pb in rest] == [1]
    last = rest[0].batch
    assert last.input_ids.shape == (4, 8)
    assert last.attention_mask[1:].sum(axis=1).tolist() == [1, 1, 1]  # dummies: one token


def test_bucketer_with_exact_lengths_batches_one_length_without_padding(corpus):
    """A side that cannot mask padding (a signature without an attention mask)."""
    import numpy as np

    from tfparity.sweep.bucketing import Encoded
    from tfparity.sweep.corpus import Item

    b = Bucketer(batch_size=2, limit=64, pad_id=0, exact_lengths=True)
    lengths = [3, 5, 3, 4, 5, 3]
    rows = [
        Encoded(Item(i, str(i), "x"), np.arange(1, n + 1, dtype=np.int32), None)
        for i, n in enumerate(lengths)
    ]
    batches = [pb for e in rows for pb in b.add(e)] + list(b.flush())
    assert sorted(pb.bucket for pb in batches) == [3, 3, 4, 5]
    assert all(pb.batch.input_ids.shape[1] == pb.bucket for pb in batches)
    assert all(pb.batch.attention_mask.all() for pb in batches)
    assert sorted(i.index for pb in batches for i in pb.items) == list(range(6))


def test_resume_after_kill_and_torn_line(
    tiny, corpus, baseline, tmp_path, sweep_differences, stop_after
):
    out = tmp_path / "resumed"
    options = SweepOptions(checks=CHECKS, batch_size=8, progress="none")
    killed = run_sweep(tiny, corpus, out, replace(options, engine=stop_after(10)))
    first = lines(out / "results.jsonl")
    assert 10 <= len(first) < N_ITEMS and killed.summary["complete"] is False
    with open(out / "results.jsonl", "a", encoding="utf-8") as f:
        f.write('{"index": 29, "text": "torn')  # killed mid-write
    with pytest.raises(TfparityError, match="--resume"):
        run_sweep(tiny, corpus, out, options)
    done, count = read_done(out / "results.jsonl", N_ITEMS)
    assert count == len(first) and (out / "results.jsonl").read_text().endswith("\n")
    resumed = run_sweep(tiny, corpus, out, SweepOptions(**{**options.__dict__, "resume": True}))
    records = lines(out / "results.jsonl")
    assert sorted(r["index"] for r in records) == list(range(N_ITEMS))  # each exactly once
    assert records[: len(first)] == first  # finished items were not redone
    assert resumed.summary["run"]["items_this_run"] == N_ITEMS - len(first)
    assert sweep_differences(resumed.summary, baseline.summary) == []


def test_out_dir_of_another_sweep_is_refused(tiny, corpus, baseline):
    other = SweepOptions(checks=("embeds",), progress="none", resume=True)
    with pytest.raises(TfparityError, match="another sweep.*checks"):
        run_sweep(tiny, corpus, baseline.out, other)


def test_broken_model_fails_in_crosscheck(corpus, tmp_path):
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import by_name

    broken = by_name("dropped output bias").apply(TFModel.load("tiny:bert"))
    options = SweepOptions(checks=("embeds", "crosscheck"), batch_size=16, progress="none")
    result = run_sweep(broken, corpus, tmp_path / "broken", options)
    s = result.summary
    assert not result.passed and s["failed"] == N_ITEMS
    assert s["per_check"]["crosscheck"]["failed"] == N_ITEMS
    assert s["per_check"]["embeds"]["passed"] == N_ITEMS  # self-consistent, still
    assert s["per_check"]["crosscheck"]["max_abs_diff"]["p50"] > 1e-2
    record = lines(result.out / "results.jsonl")[0]
    assert record["passed"] is False
    assert "hidden_states[2]" in record["checks"]["crosscheck"]["failing"]
    assert "hidden_states[1]" not in record["checks"]["crosscheck"]["failing"]


def test_cli_sweep_jsonl_with_ids_and_progress_lines(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    items = [{"id": f"q{i}", "text": t} for i, t in enumerate(["Hi.", "Two words", "A third one."])]
    corpus.write_text("\n".join(json.dumps(x) for x in items) + "\n")
    out = tmp_path / "out"
    argv = ["sweep", "tiny:bert", "--texts", str(corpus), "--out", str(out), "--checks", "embeds"]
    assert main(argv + ["--progress", "lines"]) == 0
    captured = capsys.readouterr()
    assert "3/3 items (100%)" in captured.err and "items/s" in captured.err
    said = captured.err.splitlines()  # what it does is said before the long silent parts
    assert said[0].startswith("sweep: loading tiny:bert (starting TensorFlow")
    assert said[1].startswith("sweep: first batch (") and said[2].startswith("sweep: 3/3 items")
    assert "PASS sweep: 3/3 items passed" in captured.out
    assert sorted(r["id"] for r in lines(out / "results.jsonl")) == ["q0", "q1", "q2"]
    assert main(argv) == 2  # results already there, no --resume
    assert "--resume" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--texts", "/nonexistent/corpus.txt"], "Cannot read the corpus"),
        (["--texts", "EMPTY"], "holds no text"),
        (["--texts", "BADJSON"], "not valid JSON"),
        (["--shard", "2/2"], "--shard must be K/N"),
        (["--checks", "embeds,nope"], "Unknown or repeated check"),
    ],
)
def test_cli_bad_input_exits_2(tmp_path, capsys, extra, message):
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": \n')
    extra = [
        {"EMPTY": str(tmp_path / "empty.txt"), "BADJSON": str(tmp_path / "bad.jsonl")}.get(x, x)
        for x in extra
    ]
    assert main(["sweep", "tiny:bert", "--out", str(tmp_path / "o"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_progress_plain_lines():
    stream = io.StringIO()
    p = Progress(total=4, mode="lines", stream=stream, every_s=0.0)
    p.stage("loading tiny:bert")
    p.update(2)
    p.update(2)
    p.close()
    out = stream.getvalue().splitlines()
    assert out[0] == "sweep: loading tiny:bert..."
    assert out[1].startswith("sweep: 2/4 items (50%)") and "ETA" in out[1]
    assert out[-1].startswith("sweep: 4/4 items (100%)")
    quiet = io.StringIO()
    p = Progress(total=4, mode="none", stream=quiet)
    p.stage("loading tiny:bert")
    p.update(4)
    assert quiet.getvalue() == ""


def test_skipped_items_are_named_in_the_verdict_and_fail_under_strict(tiny, tmp_path, capsys):
    from tfparity.report.sweep import render_summary
    from tfparity.sweep.summary import sweep_passed

    long = "the quick brown fox jumps over the lazy dog " * 12  # > 64 tiny positions
    corpus = tmp_path / "c.txt"
    corpus.write_text(f"Hi.\n{long}\nTwo words\n{long}\nA third one.\n")
    options = SweepOptions(checks=("embeds",), progress="none")
    result = run_sweep(tiny, corpus, tmp_path / "api", options)
    verdict = render_summary(result.summary, "out").splitlines()[-1]
    assert verdict.startswith("PASS sweep: 3/3 items checked passed, 2 of 5 not checked")
    assert sweep_passed(result.summary) and not sweep_passed(result.summary, strict=True)
    strict = render_summary(result.summary, "out", strict=True).splitlines()[-1]
    assert strict.startswith("FAIL sweep: 3/3 items checked passed, 2 of 5 not checked")
    argv = [
        "sweep",
        "tiny:bert",
        "--texts",
        str(corpus),
        "--checks",
        "embeds",
        "--strict",
        "--eager",
    ]
    assert main([*argv, "--out", str(tmp_path / "cli"), "--progress", "none"]) == 1
    assert "FAIL sweep: 3/3 items checked passed" in capsys.readouterr().out


def test_a_sweep_that_checked_every_item_passes_under_strict(baseline):
    from tfparity.report.sweep import render_summary
    from tfparity.sweep.summary import sweep_passed

    assert sweep_passed(baseline.summary, strict=True)
    verdict = render_summary(baseline.summary, "out", strict=True).splitlines()[-1]
    assert verdict.startswith(f"PASS sweep: {N_ITEMS}/{N_ITEMS} items passed;")


# ----------------------------------------------------------------------------- execution


def test_cli_sweep_graph_eager_and_summary_say_how_it_ran(corpus, tmp_path, capsys):
    base = ["sweep", "tiny:bert", "--texts", str(corpus), "--checks", "embeds"]
    base += ["--batch-size", "8", "--progress", "none"]
    assert main([*base, "--out", str(tmp_path / "g"), "--graph", "--device", "cpu"]) == 0
    assert "ran: graph on cpu:0, precision fp32" in capsys.readouterr().out
    graph = json.loads((tmp_path / "g" / "summary.json").read_text())["run"]
    assert (graph["execution"], graph["device"], graph["precision"]) == ("graph", "cpu:0", "fp32")
    assert graph["traces"] >= 2
    assert main([*base, "--out", str(tmp_path / "e"), "--eager"]) == 0
    eager = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert eager["run"]["execution"] == "eager" and eager["run"]["traces"] == 0
    assert eager["passed"] == N_ITEMS


def test_sweep_in_bf16_passes_a_clean_model_and_fails_a_broken_one(corpus, tmp_path):
    """The cross-check in bf16: PyTorch runs in bf16 too and its error to float64 sets
    the bar, as in `crosscheck --precision bf16`."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.runtime.execution_options import ExecutionOptions
    from tfparity.testing import by_name

    options = SweepOptions(
        checks=("embeds", "crosscheck"),
        batch_size=16,
        progress="none",
        execution=ExecutionOptions(graph=True, precision="bf16"),
    )
    clean = run_sweep("tiny:bert", corpus, tmp_path / "clean", options)
    assert clean.passed and clean.summary["run"]["precision"] == "bf16"
    cross = clean.summary["per_check"]["crosscheck"]["max_abs_diff"]
    assert 1e-4 < cross["max"] < 0.2  # bf16 rounding, judged against PyTorch bf16's
    broken = by_name("dropped output bias").apply(TFModel.load("tiny:bert"))
    failed = run_sweep(broken, corpus, tmp_path / "broken", options)
    assert failed.summary["per_check"]["crosscheck"]["failed"] == N_ITEMS
    assert failed.summary["per_check"]["embeds"]["passed"] == N_ITEMS


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--checks", "positions", "--precision", "fp16"], "positions check judges"),
        (["--atol", "-1"], "argument --atol: '-1' is not a finite number >= 0"),
    ],
)
def test_cli_sweep_execution_refusals_exit_2(tmp_path, capsys, extra, message):
    out = tmp_path / "o"
    try:
        code = main(["sweep", "tiny:bert", "--out", str(out), *extra])
    except SystemExit as exc:  # argparse refuses a bad flag value itself
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (out / "results.jsonl").exists()


def test_cli_sweep_on_a_missing_gpu_exits_2(tmp_path, capsys):
    from tfparity.adapters.runtime.imports import import_tf

    if import_tf().config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    assert main(["sweep", "tiny:bert", "--out", str(tmp_path / "o"), "--device", "gpu"]) == 2
    assert "TensorFlow sees no GPU" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_the_builtin_corpus_is_named_without_a_machine_path():
    """summary.json names the built-in corpus by its place in the package, not by the
    site-packages directory it is installed in; a user's corpus keeps the given path."""
    from tfparity.sweep import DEFAULT_CORPUS
    from tfparity.sweep.corpus import scan

    assert scan(DEFAULT_CORPUS).to_dict()["path"] == "tfparity/data/corpus.txt (built in)"
    assert scan("tfparity/data/corpus.txt").to_dict()["path"].startswith("tfparity/data/")


# ----------------------------------------------------------------------------- row verdicts

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    shape=st.sampled_from([(3, 4, 2), (2, 5), (4, 3, 2, 2), (1, 1, 3)]),
    atol=st.floats(0, 1, allow_nan=False),
    rtol=st.floats(0, 0.5, allow_nan=False),
)
def test_property_batched_row_verdicts_equal_compare_arrays_row_by_row(data, shape, atol, rtol):
    """The sweep's vectorised per-row verdicts are compare_arrays' on each row alone."""
    import numpy as np

    from tfparity.compare import Tolerance, compare_arrays
    from tfparity.sweep.itemcheck import leaf_rows

    elements = st.floats(-10, 10, width=32) | st.sampled_from([np.nan, np.inf, -np.inf])
    a = data.draw(hnp.arrays(np.float32, shape, elements=elements))
    b = data.draw(hnp.arrays(np.float32, shape, elements=elements))
    mask = data.draw(hnp.arrays(np.int32, shape[:2], elements=st.integers(0, 1)))
    tol = Tolerance(atol=atol, rtol=rtol, equal_nan=data.draw(st.booleans()))
    rows = leaf_rows(a, b, mask, "x", tol)
    for r in range(shape[0]):
        c = compare_arrays(a[r : r + 1], b[r : r + 1], mask=mask[r : r + 1], tolerance=tol)
        assert bool(rows.passed[r]) == c.passed
        assert float(rows.max_abs_diff[r]) == c.max_abs_diff


def test_cli_pt_names_the_reference_and_is_part_of_the_run(corpus, tmp_path, capsys):
    """`--pt` is the cross-check's reference: the seeded tiny:bert passes, recorded in the
    manifest; another architecture's checkpoint is used (and refused), not ignored; a
    resume against another reference is refused rather than mixing two runs."""
    out = tmp_path / "o"
    base = ["sweep", "tiny:bert", "--texts", str(corpus), "--checks", "crosscheck"]
    assert main([*base, "--out", str(out), "--pt", "tiny:bert"]) == 0
    assert json.loads((out / "run.json").read_text())["reference"] == "tiny:bert"
    assert len(lines(out / "results.jsonl")) == 30
    capsys.readouterr()
    assert main([*base, "--out", str(out), "--resume"]) == 2  # the model's own, not --pt's
    assert "reference" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "r"), "--pt", "tiny:roberta"]) == 2
    assert "roberta" in capsys.readouterr().err


def test_both_engines_meet_the_sweep_engine_protocol(tiny, corpus):
    """runner.ENGINES holds the local and the Ray engine; each has every member of the
    SweepEngine protocol with its signature, and a started local engine answers each
    (a started Ray engine: tests/sweep/test_sweep_ray.py's isinstance check and run)."""
    import inspect

    from tfparity.adapters.runtime.execution_options import ExecutionOptions
    from tfparity.sweep.corpus import iter_items, scan
    from tfparity.sweep.engine import EngineStart, SweepEngine
    from tfparity.sweep.local import LocalEngine
    from tfparity.sweep.ray_engine import RayEngine
    from tfparity.sweep.runner import ENGINES

    assert {start.__self__ for start in ENGINES.values()} == {LocalEngine, RayEngine}
    members = [n for n in vars(SweepEngine) if not n.startswith("_")]
    assert members == ["top1_note", "records", "run_facts", "close"]
    start_signature = inspect.signature(EngineStart.__call__)
    for cls in (LocalEngine, RayEngine):
        note = getattr(cls, "top1_note", None)
        if isinstance(note, property):
            assert inspect.signature(note.fget).return_annotation == "str | None"
        else:  # a dataclass field
            assert cls.__annotations__["top1_note"] == "str | None"
        for name in members[1:]:
            wanted = inspect.signature(getattr(SweepEngine, name))
            assert inspect.signature(getattr(cls, name)) == wanted, (cls, name)
        assert list(inspect.signature(cls.start).parameters) == list(start_signature.parameters)[1:]

    options = SweepOptions(checks=("embeds",), batch_size=4, progress="none")
    engine = ENGINES[type(None)](tiny, ("embeds",), None, options, ExecutionOptions(graph=True))
    assert isinstance(engine, SweepEngine) and isinstance(engine, LocalEngine)
    assert engine.top1_note is None  # tiny:bert has its LM head
    items = iter_items(scan(corpus), options.shard)
    records = [r for batch in engine.records(items) for r in batch]
    assert sorted(r["index"] for r in records) == list(range(N_ITEMS))
    assert engine.run_facts()["traces"] >= 1
    engine.close()


def test_unknown_engine_options_exit_2(tiny, corpus, tmp_path):
    options = SweepOptions(checks=("embeds",), progress="none", engine="ray")
    with pytest.raises(TfparityError, match="SweepOptions.engine must be one of None, RayOptions"):
        run_sweep(tiny, corpus, tmp_path / "o", options)
    assert not (tmp_path / "o").exists()  # refused before anything is written or loaded


def test_a_classifier_is_swept_with_label_agreement_and_a_broken_head_fails(corpus, tmp_path):
    """A head model's own logits give the sweep's top-1 column: one label per item."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.reference.pt_model import load_pt

    spec = "tiny:bert/sequence-classification"
    options = SweepOptions(checks=("crosscheck",), batch_size=8, progress="none")
    clean = run_sweep(spec, corpus, tmp_path / "clean", options)
    cross = clean.summary["per_check"]["crosscheck"]
    assert clean.passed and cross["passed"] == N_ITEMS
    assert cross["top1_tokens"] == N_ITEMS and cross["top1_agreement"] == 1.0
    broken = TFModel.load(spec)
    (bias,) = [v for v in broken.model.weights if "classifier/bias" in v.name]
    bias.assign(bias + 0.01)
    result = run_sweep(broken, corpus, tmp_path / "broken", options, pt=load_pt(spec))
    assert result.summary["per_check"]["crosscheck"]["failed"] == N_ITEMS
    failing = {
        w
        for r in lines(tmp_path / "broken" / "results.jsonl")
        for w in r["checks"]["crosscheck"]["failing"]
    }
    assert failing == {"logits"}


def test_positions_sweep_judges_a_masked_lms_logits_and_fails_ignored_position_ids(
    load_tf_model, tmp_path
):
    """`sweep --checks positions` on a head model judges its logits (it has no
    last_hidden_state); a port that drops explicit position_ids fails every item there."""
    from tfparity.adapters.hf_tf.tf_model import TFModel

    class IgnoresPositions(TFModel):
        def call_kwargs(self, batch):
            return super().call_kwargs(replace(batch, position_ids=None))

    texts = tmp_path / "few.txt"
    texts.write_text("\n".join(DEFAULT_CORPUS.read_text().splitlines()[:3]) + "\n")
    model = load_tf_model("tiny:bert/masked-lm")
    options = SweepOptions(checks=("positions",), progress="none")
    assert run_sweep(model, texts, tmp_path / "clean", options).passed
    clean = lines(tmp_path / "clean" / "results.jsonl")
    assert {r["checks"]["positions"]["worst"] for r in clean} == {"s4_vs_s1:logits"}
    broken = IgnoresPositions(model.name, model.model, model.tokenizer, model.config)
    result = run_sweep(broken, texts, tmp_path / "broken", options)
    assert not result.passed and result.summary["per_check"]["positions"]["failed"] == 3
    failing = {
        f
        for r in lines(tmp_path / "broken" / "results.jsonl")
        for f in r["checks"]["positions"]["failing"]
    }
    assert failing == {"s4_vs_s1:logits"}


def test_the_sweep_referee_is_calibrated_and_reads_the_cross_checks_lazy_as_it():
    from tfparity.errors import TfparityError
    from tfparity.sweep.options import SweepOptions, sweep_referee

    assert SweepOptions().referee == "calibrated"
    assert sweep_referee("lazy") == sweep_referee("calibrated") == "calibrated"
    assert sweep_referee("full") == "full"
    with pytest.raises(TfparityError, match="calibrated or full"):
        sweep_referee("exact")


def test_cli_tf_names_the_port_and_pt_its_reference(tmp_path, capsys):
    """`sweep --tf A --pt B` as in crosscheck: the clean port passes, the same port saved
    with a dropped output bias fails its cross-check; --tf alone exits 2."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import by_name

    texts = tmp_path / "few.txt"
    texts.write_text("\n".join(DEFAULT_CORPUS.read_text().splitlines()[:3]) + "\n")
    base = ["sweep", "--texts", str(texts), "--checks", "crosscheck", "--progress", "none"]
    assert (
        main([*base, "--tf", "tiny:bert", "--pt", "tiny:bert", "--out", str(tmp_path / "a")]) == 0
    )
    broken = by_name("dropped output bias").apply(TFModel.load("tiny:bert"))
    broken.model.save_pretrained(tmp_path / "port")
    broken.tokenizer.save_pretrained(tmp_path / "port")
    port = ["--tf", str(tmp_path / "port"), "--pt", "tiny:bert"]
    assert main([*base, *port, "--out", str(tmp_path / "b")]) == 1
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["per_check"]["crosscheck"]["failed"] == 3
    capsys.readouterr()
    assert main([*base, "--tf", str(tmp_path / "port"), "--out", str(tmp_path / "c")]) == 2
    assert "nothing names its PyTorch reference" in capsys.readouterr().err


def test_a_head_whose_matrix_cannot_be_read_leaves_top1_out_not_the_sweep(tmp_path):
    """MobileBERT's LM head builds its output matrix from parts: the sweep goes on
    without top-1 agreement and says why (it crashed with a TypeError)."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\nthe cat sat\n", encoding="utf-8")
    options = SweepOptions(checks=("embeds",), progress="none")
    result = run_sweep("tiny:mobilebert", corpus, tmp_path / "out", options)
    assert result.passed and result.summary["complete"]
    note = json.loads((tmp_path / "out" / "run.json").read_text())["top1_note"]["embeds"]
    assert "TFMobileBertLMPredictionHead" in note and "cannot be judged" in note
