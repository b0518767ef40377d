"""Execution options: devices, tf.function/XLA, mixed precision, TF32, and the safety
of every path (ids checked before the model, out of memory as a clear error)."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.runtime.execution import (
    mixed_precision_policy,
    out_of_memory_as_error,
    tf32_enabled,
)
from tfparity.adapters.runtime.execution_options import ExecutionOptions, parse_mode
from tfparity.api import make_batches
from tfparity.errors import TfparityError
from tfparity.inputs import Batch, InputOptions


def test_parse_mode_combines_parts():
    opts = parse_mode("xla+fp16")
    assert (opts.xla, opts.precision, opts.compute_dtype, opts.label) == (
        True,
        "fp16",
        "float16",
        "xla+fp16",
    )
    assert parse_mode("graph").runner_kind == "graph"
    assert parse_mode("tf32").compute_dtype == "tf32"
    assert parse_mode("eager").label == "eager" and parse_mode("eager").tf32 is None


@pytest.mark.parametrize("bad", ["fast", "fp16+bf16", "", "xla+int8"])
def test_parse_mode_rejects_unknown_modes(bad):
    with pytest.raises(TfparityError):
        parse_mode(bad)


def test_unknown_precision_is_a_usage_error():
    with pytest.raises(TfparityError, match="Unknown precision 'fp8'"):
        ExecutionOptions(precision="fp8")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def xla_bert(load_tf_model):
    return load_tf_model("tiny:bert").executed(ExecutionOptions(xla=True))


def _batch(**overrides) -> Batch:
    ids = np.array([[2, 5, 6, 3]], np.int32)
    fields = dict(
        input_ids=ids,
        attention_mask=np.ones_like(ids),
        token_type_ids=np.zeros_like(ids),
        position_ids=np.arange(4, dtype=np.int32)[None, :],
    )
    fields.update(overrides)
    return Batch(**fields)


@pytest.mark.parametrize(
    "field, bad, message",
    [
        ("input_ids", np.array([[2, 5, 10_000, 3]], np.int32), "input_ids out of range: 10000"),
        ("input_ids", np.array([[2, -1, 6, 3]], np.int32), "input_ids out of range: -1"),
        ("token_type_ids", np.array([[0, 0, 2, 0]], np.int32), "token_type_ids out of range: 2"),
        ("position_ids", np.array([[0, 1, 64, 3]], np.int32), "position_ids out of range: 64"),
    ],
)
def test_out_of_range_ids_are_caught_before_the_xla_model(xla_bert, field, bad, message):
    before = dict(xla_bert.paths.functions)
    with pytest.raises(TfparityError, match=message):
        xla_bert.run(_batch(**{field: bad}))
    assert xla_bert.paths.functions == before  # nothing was traced or run for the bad batch


def test_xla_run_matches_eager_within_fp32_tolerance(xla_bert, load_tf_model):
    batch = _batch()
    eager = load_tf_model("tiny:bert").run(batch)
    compiled = xla_bert.run(batch)
    assert xla_bert.paths.functions  # the compiled path really ran
    assert xla_bert.traces >= 1  # and its traces are counted
    assert list(compiled) == list(eager)
    for name in eager:
        np.testing.assert_allclose(compiled[name], eager[name], atol=1e-5, rtol=1.3e-6)


def test_mixed_precision_clone_leaves_no_global_policy(load_tf_model):
    import tf_keras

    model = load_tf_model("tiny:bert")
    fp16 = model.executed(ExecutionOptions(precision="fp16"))
    assert tf_keras.mixed_precision.global_policy().name == "float32"
    assert fp16.model is not model.model and model.model.compute_dtype == "float32"
    out = fp16.run(_batch())
    assert out["last_hidden_state"].dtype == np.float16
    assert model.run(_batch())["last_hidden_state"].dtype == np.float32


def test_policy_is_restored_after_an_error():
    import tf_keras

    with pytest.raises(RuntimeError), mixed_precision_policy("mixed_bfloat16"):
        assert tf_keras.mixed_precision.global_policy().name == "mixed_bfloat16"
        raise RuntimeError("boom")
    assert tf_keras.mixed_precision.global_policy().name == "float32"


def test_tf32_switch_is_restored():
    import tensorflow as tf

    before = tf.config.experimental.tensor_float_32_execution_enabled()
    with tf32_enabled(not before):
        assert tf.config.experimental.tensor_float_32_execution_enabled() is (not before)
    assert tf.config.experimental.tensor_float_32_execution_enabled() is before


def test_out_of_memory_becomes_a_clear_usage_error():
    import tensorflow as tf

    with pytest.raises(TfparityError, match="do not fit in the memory of gpu:0.*--batch-size"):
        with out_of_memory_as_error("/device:GPU:0"):
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
    with pytest.raises(tf.errors.InternalError):  # other internal errors stay what they are
        with out_of_memory_as_error("/device:GPU:0"):
            raise tf.errors.InternalError(None, None, "something else")


def test_embeds_check_under_xla_and_fp16(load_tf_model):
    from tfparity import check_embeds

    runner = load_tf_model("tiny:bert").executed(ExecutionOptions(xla=True, precision="fp16"))
    report = check_embeds(runner, inputs=InputOptions(random=4, seq_len=10, batch_size=4))
    assert report.passed, report.failures
    assert {c.dtype for c in report.comparisons} == {"float16"}


# ----------------------------------------------------------------------------- graph runs


def test_graph_traces_once_per_path_whatever_the_batch_shapes(load_tf_model):
    """Batches of different sizes and lengths share one trace per path, and agree with
    the eager run within fp32 tolerance."""
    from tfparity.compare import compare_outputs

    model = load_tf_model("tiny:bert")
    graph = model.executed(ExecutionOptions(graph=True))
    shapes = [(1, 3), (4, 17), (2, 9), (3, 30)]
    for i, (rows, seq) in enumerate(shapes):
        options = InputOptions(random=rows, seq_len=seq, batch_size=rows, seed=i)
        (batch,) = make_batches(model, options)
        for embeds in (None, graph.gather(batch.input_ids)):
            actual = graph.run(batch, embeds)
            expected = model.run(batch, embeds)
            results = compare_outputs(dict(actual), dict(expected), mask=batch.attention_mask)
            assert all(c.passed for c in results), [c.name for c in results if not c.passed]
    assert graph.traces == 2  # ids and embeds, once each


def test_eager_twin_shares_the_model_and_runs_eagerly(load_tf_model):
    model = load_tf_model("tiny:bert")
    graph = model.executed(ExecutionOptions(graph=True, precision="fp32"))
    twin = graph.eager()
    assert twin.model is graph.model
    assert twin.execution == ExecutionOptions()
    assert twin.eager() is twin and model.eager() is model


@pytest.mark.parametrize(
    ("options", "batches", "expected"),
    [
        (ExecutionOptions(auto=True), 7, "eager"),
        (ExecutionOptions(auto=True), 8, "graph"),
        (ExecutionOptions(auto=True), 100, "graph"),
        (ExecutionOptions(), 100, "eager"),  # --eager is kept
        (ExecutionOptions(graph=True), 1, "graph"),  # --graph is kept
        (ExecutionOptions(xla=True, auto=True), 1, "xla"),
    ],
)
def test_settle_chooses_graph_from_eight_batches(options, batches, expected):
    settled = options.settle(batches)
    assert settled.runner_kind == expected
    assert ("execution_chosen" in settled.describe()) == (options.auto and not options.xla)


def test_crosscheck_taps_run_eagerly_under_graph_execution(load_tf_model):
    """Sub-layer taps record Python-side layer calls: under a graph execution the
    cross-check must still record them (on its eager twin)."""
    from tfparity.adapters.reference.pt_model import PTModel
    from tfparity.api import crosscheck

    model = load_tf_model("tiny:bert")
    graph = model.executed(ExecutionOptions(graph=True))
    inputs = InputOptions(random=4, seq_len=12, batch_size=2)
    pt_model = PTModel.from_tf(model.model)
    (report,) = crosscheck(tf=graph, pt=pt_model, inputs=inputs, localise="always")
    assert report.passed, report.failures
    assert report.details["execution"] == "graph"
    names = {c["name"] for c in report.details["components"]}
    assert {"layer_0.attention", "layer_1.output"} <= names
    assert all(row["isolated_ok"] for row in report.details["layers"][1:])


ARCHS = ["bert", "roberta", "gpt2", "albert", "distilbert", "electra", "xlnet", "t5"]


@pytest.mark.parametrize("arch", ARCHS)
def test_every_tiny_architecture_runs_traced_as_it_runs_eagerly(load_tf_model, arch):
    """From 8 batches the CLI traces the model: every architecture must trace (autograph
    off) once per path and agree with its eager run."""
    from tfparity.compare import compare_outputs

    model = load_tf_model(f"tiny:{arch}")
    graph = model.executed(ExecutionOptions(graph=True))
    batches = make_batches(model, InputOptions(random=5, seq_len=12, batch_size=3, seed=3))
    for batch in batches:
        for embeds in (None, model.gather(batch.input_ids)):
            results = compare_outputs(
                dict(graph.run(batch, embeds)),
                dict(model.run(batch, embeds)),
                mask=batch.attention_mask,
            )
            assert all(c.passed for c in results), [c.name for c in results if not c.passed]
    assert graph.traces == 2


# ----------------------------------------------------------------------------- one runner


def test_gathered_path_matches_given_embeddings_eager_and_graph(load_tf_model):
    """The sweep's embeds path (gather inside the run) gives what the checks' embeds
    path (gather on the Keras side, then run) gives: exactly when eager, within fp32
    tolerance when traced (graph optimisations round differently)."""
    model = load_tf_model("tiny:bert")
    (batch,) = make_batches(model, InputOptions(random=3, seq_len=10, batch_size=3))
    expected = model.run(batch, model.gather(batch.input_ids))
    from tfparity.compare import compare_outputs

    eager = model.executed(ExecutionOptions()).run_gathered(batch)
    assert list(eager) == list(expected)
    for name in expected:  # eagerly: the same ops, the same numbers
        np.testing.assert_array_equal(eager[name], expected[name])
    runner = model.executed(ExecutionOptions(graph=True))
    results = compare_outputs(dict(runner.run_gathered(batch)), dict(expected))
    assert all(c.passed for c in results), [c.name for c in results if not c.passed]
    assert runner.traces_by_path() == {"embeds": 1}


def test_gathered_path_checks_ids_before_the_run(load_tf_model):
    runner = load_tf_model("tiny:bert").executed(ExecutionOptions(graph=True))
    with pytest.raises(TfparityError, match="input_ids"):
        runner.run_gathered(_batch(input_ids=np.array([[2, 10**6, 6, 3]], np.int32)))
    assert runner.traces == 0


def test_xla_compiles_once_per_shape_and_path(load_tf_model):
    """The sweep's buckets under XLA: one compile per shape and path, none for a repeated
    shape; explicit position ids count as the positions path."""
    model = load_tf_model("tiny:bert")
    runner = model.executed(ExecutionOptions(xla=True))
    shapes = [(2, 8), (2, 16), (2, 8)]
    for i, (rows, seq) in enumerate(shapes):
        ids = np.random.default_rng(i).integers(5, 50, (rows, seq)).astype(np.int32)
        fixed = Batch(ids, np.ones_like(ids), np.zeros_like(ids))
        runner.run(fixed)
        runner.run_gathered(fixed)
        positions = np.tile(np.arange(seq, dtype=np.int32), (rows, 1))
        runner.run(Batch(ids, np.ones_like(ids), np.zeros_like(ids), positions))
    assert runner.traces_by_path() == {"ids": 2, "embeds": 2, "positions": 2}
    assert runner.traces == 6


@pytest.mark.parametrize(
    "model, when, mode, said",
    [
        ("tiny:mistral", "while building", "--eager", "expected to be a"),
        ("tiny:ctrl", "while running", "--eager", "expected to be a"),
        ("tiny:ctrl", "while running", "--graph", "does not match type"),
    ],
)
def test_a_model_whose_tf_code_breaks_under_a_mixed_policy_exits_2_naming_it(
    model, when, mode, said, capsys
):
    """Mistral's TF mask (float32 beside half-precision scores) fails when the model is
    built under the policy, CTRL's position embeddings when it runs: both exit 2 naming
    the policy and the op, not a crash asking for a report; fp32 runs."""
    from tfparity import cli

    argv = ["check", model, "--no-pt", "--random", "2", "--seq-len", "6", mode]
    assert cli.main([*argv, "--precision", "bf16"]) == 2
    err = capsys.readouterr().err
    assert "does not run under tf-keras's mixed_bfloat16 policy" in err
    assert when in err and said in err and "please report" not in err
    assert cli.main(argv) == 0


def test_an_ids_only_scale_rounds_as_the_ids_path_does_under_fp16():
    """XGLM scales its gathered rows on the ids path, in the embedding layer's float16:
    the Keras-side gather scales them in float16 too, so the two paths agree bitwise
    (scaled in float32 then cast, they differed by 0.003 and the embeds check failed)."""
    import tfparity

    inputs = InputOptions(random=2, seq_len=6)
    execution = ExecutionOptions(precision="fp16")
    report = tfparity.check_embeds("tiny:xglm", inputs=inputs, execution=execution)
    assert report.passed and max(c.max_abs_diff for c in report.comparisons) == 0.0
    assert report.details["precision"] == "fp16"


@pytest.mark.parametrize("spec", ["tiny:deberta", "tiny:longformer"])
@pytest.mark.parametrize("mode", ["graph", "xla"])
def test_a_model_that_branches_on_tensors_runs_compiled(load_tf_model, spec, mode):
    """TF DeBERTa and Longformer branch on tensors: traced without autograph they fail
    (OperatorNotAllowedInGraphError, an exit 2 for --graph, --xla, `modes`, and any
    check of 8 batches or more), so their paths are traced again with it, and agree
    with eager."""
    from dataclasses import replace

    model = load_tf_model(spec)
    compiled = model.executed(replace(model.execution, **{mode: True}))
    (batch,) = make_batches(model, InputOptions(random=2, seq_len=7))
    eager, traced = model.run(batch), compiled.run(batch)
    for name in eager:
        np.testing.assert_allclose(traced[name], eager[name], rtol=1e-5, atol=1e-5)
    assert compiled.traces_by_path()["ids"] >= 1


@pytest.mark.parametrize("spec", ["tiny:xlm", "tiny:flaubert"])
def test_xlm_and_flaubert_take_inputs_embeds_in_a_trace_of_any_batch(load_tf_model, spec):
    """Given inputs_embeds without ``lengths`` in a trace of unknown batch size, their
    TF code builds a ``lengths`` of one element and fails its own assertion (graph mode,
    and so any check of 8 batches or more). The lengths, passed from the mask, keep the
    shapes; the mask still decides."""
    from dataclasses import replace

    model = load_tf_model(spec)
    graph = model.executed(replace(model.execution, graph=True))
    (batch,) = make_batches(model, InputOptions(random=3, seq_len=7))
    assert (batch.attention_mask == 0).any()  # a padded row: the lengths differ
    eager = model.run(batch)
    for traced in (graph.run(batch), graph.run_gathered(batch)):
        for name in eager:
            np.testing.assert_allclose(traced[name], eager[name], rtol=1e-5, atol=1e-5)
