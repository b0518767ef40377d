"""The modes check: tolerances by dtype, modes that agree pass, broken ones fail."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfparity.adapters.runtime.execution_options import ExecutionOptions, parse_mode
from tfparity.checks.embeds import NonFiniteOutputError
from tfparity.checks.modes import (
    ModesOptions,
    PlannedMode,
    check_modes,
    compare_mode,
    mode_tolerance,
    plan_modes,
    reference_magnitudes,
)
from tfparity.compare import Tolerance, default_tolerance
from tfparity.inputs import InputOptions, make_batches
from tfparity.report.modes import render_modes

RANDOM = InputOptions(random=4, seq_len=12, batch_size=4, seed=1)


@pytest.mark.parametrize(
    "dtype, rtol", [("float16", 1e-3), ("bfloat16", 1.6e-2), ("float32", 1.3e-6), ("tf32", 1e-3)]
)
def test_tolerance_follows_the_dtype_and_scales_with_the_tensor(dtype, rtol):
    tol = mode_tolerance(dtype, 2.5)
    assert tol == Tolerance(atol=pytest.approx(4 * rtol * 2.5), rtol=rtol)
    assert mode_tolerance(dtype, 0.0).atol == default_tolerance("float32").atol  # the floor
    assert mode_tolerance("bfloat16", 1.0).atol > mode_tolerance("float16", 1.0).atol


def test_plan_on_cpu_skips_the_reference_and_tf32():
    plan, skipped = plan_modes("all", ("eager", "graph", "xla", "fp16", "bf16", "tf32"))
    assert [p.label for p in plan] == ["graph", "xla", "fp16", "bf16"]
    assert len(skipped) == 1 and skipped[0].startswith("tf32 on cpu:0")


@pytest.fixture(scope="module")
def bert(load_tf_model):
    return load_tf_model("tiny:bert")


@pytest.fixture(scope="module")
def batches(bert):
    return make_batches(bert, RANDOM)


@pytest.fixture(scope="module")
def report(bert, batches):
    return check_modes(bert, batches, ModesOptions(devices="cpu", modes=("graph", "xla", "fp16")))


def test_eager_graph_and_xla_agree_within_fp32_tolerance(report):
    assert report.passed, report.failures
    names = {c.name for c in report.comparisons}
    assert {"graph:last_hidden_state", "xla:last_hidden_state", "xla:hidden_states[0]"} <= names
    fp32 = default_tolerance("float32")  # the unscaled torch default, not only the scaled one
    for c in report.comparisons:
        if c.name.startswith(("graph:", "xla:")):
            assert c.max_abs_diff <= fp32.atol, c.name
            assert c.rtol == fp32.rtol


def test_fp16_is_judged_by_its_own_tolerance(report):
    fp16 = [c for c in report.comparisons if c.name.startswith("fp16:")]
    assert fp16 and all(c.passed and c.dtype == "float16" for c in fp16)
    assert all(c.rtol == 1e-3 for c in fp16)
    assert max(c.max_abs_diff for c in fp16) > 1e-4  # it really ran in half precision
    rows = {r["mode"]: r for r in report.details["modes"]}
    assert rows["fp16"]["precision"] == "fp16" and rows["xla"]["execution"] == "xla"


def test_report_renders_and_is_json(report):
    text = render_modes(report)
    assert "tensor" in text and "graph" in text and "xla" in text and "PASS modes" in text
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["check"] == "modes" and data["details"]["reference"] == "cpu:0 eager fp32"


def _reference(bert, batches):
    runner = bert.executed(ExecutionOptions(device="/device:CPU:0"))
    reference = [runner.run(b) for b in batches]
    return reference, [b.attention_mask for b in batches]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_reduced_precision_judged_with_fp32_tolerance_fails(bert, batches, precision):
    reference, masks = _reference(bert, batches)
    traces = [bert.executed(parse_mode(precision)).run(b) for b in batches]
    magnitudes = reference_magnitudes(reference, masks)
    own = compare_mode(
        PlannedMode(precision, parse_mode(precision)), traces, reference, masks, magnitudes
    )
    as_fp32 = compare_mode(
        PlannedMode(precision, parse_mode("eager")), traces, reference, masks, magnitudes
    )
    assert all(c.passed for c in own)
    assert not any(c.passed for c in as_fp32)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_a_corrupted_weight_in_a_precision_mode_fails(bert, batches, precision):
    reference, masks = _reference(bert, batches)
    runner = bert.executed(parse_mode(precision))  # a clone: safe to break
    gamma = next(w for w in runner.model.weights if "layer_._1/output/LayerNorm/gamma" in w.name)
    gamma.assign(gamma * 1.1)  # a 10% error in the last layer's LayerNorm scale
    traces = [runner.run(b) for b in batches]
    found = compare_mode(
        PlannedMode(precision, parse_mode(precision)),
        traces,
        reference,
        masks,
        reference_magnitudes(reference, masks),
    )
    failed = {c.name for c in found if not c.passed}
    assert f"{precision}:last_hidden_state" in failed
    assert f"{precision}:hidden_states[1]" not in failed  # the layer before still agrees


def test_nan_in_a_mode_only_fails_loudly(bert, batches):
    reference, masks = _reference(bert, batches)
    runner = bert.executed(parse_mode("fp16"))
    kernel = next(w for w in runner.model.weights if "layer_._0/intermediate" in w.name)
    values = kernel.numpy()
    values[0, 0] = np.nan
    kernel.assign(values)
    found = compare_mode(
        PlannedMode("fp16", parse_mode("fp16")),
        [runner.run(b) for b in batches],
        reference,
        masks,
        reference_magnitudes(reference, masks),
    )
    last = next(c for c in found if c.name == "fp16:last_hidden_state")
    assert not last.passed and last.nonfinite_actual > 0 and "NaN" in last.problem


def test_nan_in_a_weight_never_passes():
    from tfparity.adapters.hf_tf.tf_model import TFModel

    model = TFModel.load("tiny:bert")  # own copy: we break it
    matrix = model.word_embeddings()
    values = matrix.numpy()
    values[:, 3] = np.nan
    matrix.assign(values)
    batches = make_batches(model, RANDOM)
    with pytest.raises(NonFiniteOutputError, match="NaN"):
        check_modes(model, batches, ModesOptions(devices="cpu", modes=("xla", "fp16")))


def test_fixed_tolerance_overrides_the_scaled_rule(bert, batches):
    strict = Tolerance(atol=0.0, rtol=0.0)
    report = check_modes(
        bert, batches, ModesOptions(devices="cpu", modes=("bf16",), tolerance=strict)
    )
    assert not report.passed
    assert report.details["modes"][0]["tolerance"].startswith("fixed")
    assert any("bf16: first differs" in n for n in report.notes)


def test_cli_modes_writes_json(tmp_path, capsys):
    from tfparity.cli import main

    path = tmp_path / "modes.json"
    argv = ["modes", "tiny:bert", "--modes", "xla", "--random", "2", "--seq-len", "8"]
    assert main([*argv, "--json", str(path)]) == 0
    assert "xla" in capsys.readouterr().out
    data = json.loads(path.read_text())
    assert data["passed"] and data["comparisons"][0]["name"].startswith("xla:")


def test_a_precision_the_models_tf_code_cannot_run_is_not_run_and_said_so(capsys):
    """transformers' TF CTRL adds float32 position embeddings to half-precision
    activations: fp16 and bf16 cannot run (reported, not a crash); the other modes are
    judged. Asked for alone, they compare nothing: exit 2 naming why."""
    from tfparity import cli

    assert cli.main(["modes", "tiny:ctrl", "--random", "2", "--seq-len", "6"]) == 0
    out = capsys.readouterr().out
    for policy in ("mixed_float16", "mixed_bfloat16"):
        assert f"TFCTRLModel does not run under tf-keras's {policy} policy" in out
    assert "not run: fp16:" in out and "PASS modes" in out
    assert cli.main(["modes", "tiny:ctrl", "--modes", "fp16,bf16", "--random", "2"]) == 2
    err = capsys.readouterr().err
    assert "None of the modes fp16, bf16 ran" in err and "please report" not in err
