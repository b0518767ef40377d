"""The PyTorch cross-check: correct ports pass, each kind of broken port fails and is
localised to the right hidden state, layer and component (the fault catalogue)."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest

from tfparity import InputOptions, Tolerance
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.reference.pt_model import PTModel
from tfparity.adapters.sources.specs import minilm_dir
from tfparity.api import crosscheck, make_batches
from tfparity.checks.crosscheck.check import CrosscheckOptions
from tfparity.checks.crosscheck.check import crosscheck as run_crosscheck
from tfparity.testing import CATALOGUE, by_name, catalogue_for, with_config

TINY = "tiny:bert"


@pytest.fixture(scope="module")
def tiny_reference(load_tf_model):
    """PyTorch tiny:bert (weights copied from the seeded TF model) and the batches."""
    tf_model = load_tf_model(TINY)
    batches = make_batches(tf_model, InputOptions(random=6, seq_len=16, batch_size=3, seed=1))
    return PTModel.from_tf(tf_model.model), batches


def zero(var) -> None:
    var.assign(np.zeros(var.shape, var.dtype.as_numpy_dtype))


FAULTS = [f.name for f in CATALOGUE]


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_catalogue_on_tiny_bert(tiny_reference, fault):
    pt_model, batches = tiny_reference
    f = by_name(fault)
    e = f.expect
    hidden, layer, component, hint_word = e.hidden_state, e.layer, e.component, e.hint
    broken = f.apply(TFModel.load(TINY))
    report = run_crosscheck(broken, pt_model, batches)
    assert report.passed is False
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (hidden, layer, component), d
    assert hint_word in d.hint, d.hint


def test_correct_tiny_port_passes_across_20_seeded_input_sets(tiny_reference, load_tf_model):
    pt_model, _ = tiny_reference
    tf_model = load_tf_model(TINY)
    shapes = [(1, 1), (1, 64), (3, 64), (4, 1)] + [(b, s) for b in (1, 2, 5) for s in (7, 33)]
    for seed in range(20):
        rows, seq = shapes[seed % len(shapes)]
        side = "left" if seed % 2 else "right"
        batches = make_batches(
            tf_model,
            InputOptions(random=rows, seq_len=seq, batch_size=rows, seed=seed, padding_side=side),
        )
        report = run_crosscheck(tf_model, pt_model, batches)
        assert report.passed, (seed, rows, seq, [c.name for c in report.failures])
        assert report.first_divergence is None


def test_explicit_tolerance_mode_and_its_blind_spot(tiny_reference):
    """A fixed atol of 1e-2 misses a 1% LayerNorm fault that the referee catches."""
    pt_model, batches = tiny_reference
    broken = by_name("LayerNorm gamma off by 1%").apply(TFModel.load(TINY))
    assert not run_crosscheck(broken, pt_model, batches).passed
    from tfparity.checks.crosscheck.check import CrosscheckOptions

    loose = run_crosscheck(
        broken, pt_model, batches, CrosscheckOptions(tolerance=Tolerance(atol=1e-1, rtol=0))
    )
    assert loose.passed
    assert all(c.judge == "tolerance" for c in loose.comparisons)


@pytest.mark.parametrize("arch", ["xlnet", "t5"])
def test_other_architectures_pass_and_localise_by_layer(arch, load_tf_model):
    tf_model = load_tf_model(f"tiny:{arch}")
    pt_model = PTModel.from_tf(tf_model.model)
    batches = make_batches(tf_model, InputOptions(random=4, seq_len=12, batch_size=2))
    report = run_crosscheck(tf_model, pt_model, batches)
    assert report.passed, [c.name for c in report.failures]
    assert any("Sub-layer taps are available for" in n for n in report.notes)


def test_untapped_architecture_gets_weight_hints_for_its_layer():
    """XLNet has no taps, but the weights of the diverging layer are still compared."""
    tf_model = TFModel.load("tiny:xlnet")
    pt_model = PTModel.from_tf(tf_model.model)
    zero(tf_model.model.transformer.layer[1].ff.layer_1.bias)
    batches = make_batches(tf_model, InputOptions(random=4, seq_len=12, batch_size=2))
    report = run_crosscheck(tf_model, pt_model, batches)
    d = report.first_divergence
    assert report.passed is False and (d.hidden_state, d.layer, d.component) == (2, 1, None)
    assert "layer.1.ff.layer_1.bias is all zeros" in d.hint, d.hint
    assert d.hint.count("weight ") == 1, d.hint  # only the broken one
    from tfparity.report.text import render, verdict_line

    assert "layer 1 (sub-layers not tapped)" in render(report)
    assert d.cause.startswith("weight layer.1.ff.layer_1.bias is all zeros"), d.cause
    assert verdict_line(report).endswith(f"; {d.cause}")  # the fact, not only in the hint


def test_the_verdict_line_states_facts_found_not_likely_causes():
    """A weight, config field, unported weight or reordered head is a fact found: the
    first one is the verdict line's cause; a fitted activation or epsilon, or a note,
    is a likely cause and stays in the hint."""
    from tfparity.checks.crosscheck.localisation import known_cause
    from tfparity.results import Hint

    guesses = [Hint("activation", "gelu fits"), Hint("note", "the computation differs")]
    assert known_cause(guesses) == ""
    found = [*guesses, Hint("config", "config hidden_act: 'relu' (TF)"), Hint("weight", "w")]
    assert known_cause(found) == "config hidden_act: 'relu' (TF) (and 1 more)"


# ----------------------------------------------------------------------------- minilm


@pytest.fixture(scope="module")
def minilm_pt():
    return PTModel.from_dir(minilm_dir())


def test_minilm_crosscheck_passes_with_every_hidden_state(minilm_pt):
    reports = crosscheck("minilm", pt=minilm_pt, reload=False)
    (report,) = reports
    assert report.passed and report.first_divergence is None
    names = {c.name for c in report.comparisons}
    assert {f"hidden_states[{k}]" for k in range(7)} | {
        "last_hidden_state",
        "pooler_output",
    } <= names
    assert all(c.judge == "referee" for c in report.comparisons)
    assert len(report.details["layers"]) == 7
    assert max(c.max_abs_diff for c in report.comparisons) < 1e-4


def test_minilm_zeroed_attention_bias_in_layer_3(minilm_pt):
    broken = TFModel.load("minilm")
    zero(broken.model.bert.encoder.layer[3].attention.self_attention.value.bias)
    batches = make_batches(broken, InputOptions())
    report = run_crosscheck(broken, minilm_pt, batches)
    d = report.first_divergence
    assert not report.passed
    assert (d.hidden_state, d.layer, d.component) == (4, 3, "attention")
    assert "encoder.layer.3.attention.self.value.bias is all zeros" in d.hint


def test_minilm_gelu_new_port_is_localised_with_the_gelu_hint(minilm, minilm_pt):
    broken = with_config(hidden_act="gelu_new")(minilm)  # a rebuilt copy
    batches = make_batches(broken, InputOptions(texts=("Hello world.", "A second sentence.")))
    report = run_crosscheck(broken, minilm_pt, batches)
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (1, 0, "intermediate")
    assert "gelu_new (tanh approximation)" in d.hint and "gelu (exact erf)" in d.hint


def test_minilm_max_length_sequence_passes(minilm, minilm_pt):
    batches = make_batches(minilm, InputOptions(random=1, seq_len=512, batch_size=1))
    assert run_crosscheck(minilm, minilm_pt, batches).passed


# all-MiniLM-L6-v2's pooler bias is all zeros in the checkpoint: zeroing it is no fault
# there (test_zeroing_an_already_zero_bias_is_not_a_fault checks that it passes).
MINILM_FAULTS = [name for name in FAULTS if name != "zeroed pooler bias"]


def test_zeroing_an_already_zero_bias_is_not_a_fault(minilm_pt):
    model = TFModel.load("minilm")
    zero(model.model.bert.pooler.dense.bias)
    batches = make_batches(model, InputOptions(texts=("Hello world.",)))
    assert run_crosscheck(model, minilm_pt, batches).passed


@pytest.mark.parametrize("fault", MINILM_FAULTS)
def test_fault_catalogue_on_minilm(minilm_pt, fault):
    """The same catalogue on the real pretrained BERT (6 layers, 384 wide), with the
    PyTorch reference read from the checkpoint rather than copied from TF."""
    f = by_name(fault)
    e = f.expect
    hidden, layer, component, hint_word = e.hidden_state, e.layer, e.component, e.hint
    broken = f.apply(TFModel.load("minilm"))
    batches = make_batches(broken, InputOptions(texts=("Hello world.", "A second, longer one.")))
    report = run_crosscheck(broken, minilm_pt, batches)
    assert report.passed is False
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (hidden, layer, component), d
    assert hint_word in d.hint, d.hint


def test_a_broken_port_against_its_own_tiny_spec_fails():
    """The PyTorch side of `--tf X --pt tiny:bert` is the seeded tiny:bert, never a copy
    of the (broken) TF weights under test."""
    broken = by_name("dropped output bias").apply(TFModel.load(TINY))
    (report,) = crosscheck(tf=broken, pt=TINY, inputs=InputOptions(random=3, seq_len=8))
    assert report.passed is False
    assert report.first_divergence.component == "output"


def test_localise_on_failure_skips_taps_on_a_pass_and_still_localises_a_fault(
    tiny_reference, load_tf_model
):
    pt_model, batches = tiny_reference
    from tfparity.checks.crosscheck.check import CrosscheckOptions

    lazy = CrosscheckOptions(localise="on_failure")
    good = run_crosscheck(load_tf_model(TINY), pt_model, batches, lazy)
    assert good.passed and good.details["components"] == []
    assert any("skipped" in n for n in good.notes)
    broken = by_name("dropped intermediate bias").apply(TFModel.load(TINY))
    bad = run_crosscheck(broken, pt_model, batches, lazy)
    d = bad.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (1, 0, "intermediate")
    assert bad.details["components"]  # the taps ran once the failure was seen


def test_shared_tf_traces_are_used_instead_of_a_new_run(tiny_reference, load_tf_model):
    pt_model, batches = tiny_reference
    tf_model = load_tf_model(TINY)
    traces = [tf_model.run(b) for b in batches]
    traces[0].arrays["last_hidden_state"] = traces[0]["last_hidden_state"] + 1.0
    report = run_crosscheck(tf_model, pt_model, batches, tf_traces=traces)
    assert not report.passed  # the (doctored) shared traces were judged, not a fresh run


def test_last_hidden_state_is_compared_once_where_it_is_the_last_hidden_state(
    tiny_reference, load_tf_model, monkeypatch
):
    """last_hidden_state holds hidden_states[-1]'s arrays on both sides: its comparison
    is that one's, renamed; its referee verdict is its own; a failure block would name
    them together."""
    import dataclasses

    import tfparity.compare.judge as module  # where the leaf's judge compares
    from tfparity.report.text import grouped

    pt_model, batches = tiny_reference
    calls = []
    real = module.compare_batches
    monkeypatch.setattr(
        module,
        "compare_batches",
        lambda *a, name, **k: calls.append(name) or real(*a, name=name, **k),
    )
    report = run_crosscheck(load_tf_model(TINY), pt_model, batches)
    by = {c.name: c for c in report.comparisons}
    last = max((n for n in by if n.startswith("hidden_states[")), key=lambda n: int(n[14:-1]))
    assert report.passed and "last_hidden_state" not in calls and last in calls
    assert dataclasses.replace(by["last_hidden_state"], name=last) == by[last]
    assert by["last_hidden_state"].judge == "referee"
    assert (by[last], ["last_hidden_state"]) in grouped(report.comparisons)  # one block


def test_last_hidden_state_that_differs_anywhere_is_compared_on_its_own():
    from tfparity.checks.crosscheck.check import _alias_of
    from tfparity.compare import compare_arrays

    x = np.arange(24.0).reshape(2, 3, 4)
    done = {"hidden_states[2]": ([x], [x], compare_arrays(x, x, name="hidden_states[2]"))}
    assert _alias_of("last_hidden_state", [x.copy()], [x.copy()], done).name == (
        "last_hidden_state"
    )
    changed = x.copy()
    changed[1, 2, 3] += 1e-6
    assert _alias_of("last_hidden_state", [changed], [x], done) is None  # the TF side
    assert _alias_of("last_hidden_state", [x], [changed], done) is None  # PyTorch's
    assert _alias_of("pooler_output", [x], [x], done) is None  # only that one name


def test_judging_by_the_referee_returns_a_new_comparison():
    from tfparity.compare import Referee, RefereeResult, compare_arrays
    from tfparity.compare.judge import judged_by_referee

    c = compare_arrays(np.ones((2, 3)), np.ones((2, 3)) + 1.0, name="x")
    r = RefereeResult("x", 1.0, 1.0, 3.0, 1.0, passed=True)
    judged = judged_by_referee(c, r, Referee())
    assert judged is not c and judged.passed and judged.judge == "referee"
    assert not c.passed and c.judge != "referee"  # the tolerance verdict is left as it was


def test_weight_hints_are_records_naming_their_weight():
    from tfparity.checks.crosscheck.hints import config_differences, weight_differences

    pt = {"a.weight": np.ones((2, 2)), "a.bias": np.ones(2)}
    tf = {"a.weight": np.zeros((2, 2)), "a.bias": np.ones(2)}
    (hint,) = weight_differences(tf, pt, "a.")
    assert (hint.kind, hint.weight) == ("weight", "a.weight") and "all zeros" in hint.text
    assert weight_differences(pt, pt, "a.") == []
    tf_config = SimpleNamespace(model_type="bert", hidden_size=4)
    (diff,) = config_differences(tf_config, SimpleNamespace(model_type="bert", hidden_size=8))
    assert diff.kind == "config" and diff.weight is None and "hidden_size" in diff.text


# ----------------------------------------------------------------------------- precision


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_reduced_precision_port_passes_against_pytorch_in_that_precision(tiny_reference, precision):
    """A TF run under a mixed policy is refereed by PyTorch's own error in the same
    precision; with the float32 PyTorch error as the bar it would fail."""
    from tfparity.adapters.runtime.execution_options import ExecutionOptions

    pt_model, batches = tiny_reference
    execution = ExecutionOptions(precision=precision)
    (report,) = crosscheck(tf=TFModel.load(TINY), pt=pt_model, batches=batches, execution=execution)
    assert report.passed, [(c.name, c.max_abs_diff) for c in report.failures]
    assert report.details["precision"] == precision
    assert report.details["reference"].endswith(f"in {precision}")
    assert max(c.max_abs_diff for c in report.comparisons) > 1e-4  # it really ran reduced

    lowered = TFModel.load(TINY).executed(execution)
    strict = run_crosscheck(lowered, pt_model, batches)  # fp32 PyTorch sets the bar
    assert not strict.passed


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_reduced_precision_still_catches_and_localises_a_fault(tiny_reference, precision):
    from tfparity.adapters.runtime.execution_options import ExecutionOptions

    pt_model, batches = tiny_reference
    f = by_name("transposed attention output kernel")
    broken = f.apply(TFModel.load(TINY))
    execution = ExecutionOptions(precision=precision)
    (report,) = crosscheck(tf=broken, pt=pt_model, batches=batches, execution=execution)
    assert report.passed is False
    d = report.first_divergence
    e = f.expect
    assert (d.hidden_state, d.layer, d.component) == (e.hidden_state, e.layer, e.component)
    assert "transposed" in d.hint and "differs" not in d.hint, d.hint  # float32 weights compared


def test_in_precision_keeps_float32_weights_and_the_float64_referee(tiny_reference):
    import torch

    pt_model, _ = tiny_reference
    lowered = pt_model.in_precision("bf16")
    assert next(lowered.model.parameters()).dtype == torch.bfloat16
    assert lowered.fp64() is pt_model.fp64()
    weights, master = lowered.weights(), pt_model.weights()
    assert all(np.array_equal(weights[k], master[k]) for k in master)
    assert pt_model.in_precision("fp32") is pt_model


# ----------------------------------------------------------------------------- tap families

FAMILY_SPECS = {
    "distilbert": "tiny:distilbert",
    "gpt2": "tiny:gpt2",
    "albert": "tiny:albert",
    "opt": "tiny:opt",
    "mistral": "tiny:mistral",
    "mpnet": "tiny:mpnet",
    "deberta-v2": "tiny:deberta-v2",
    "mobilebert": "tiny:mobilebert",
}
LAYER_0 = ["layer_0.attention", "layer_0.intermediate", "layer_0.output"]
FAMILY_LAYOUT = {  # the taps of a correct run, in order (ALBERT's shared layer per call)
    "distilbert": ["embeddings", *LAYER_0, "layer_1.attention"],
    "gpt2": [*LAYER_0, "layer_1.attention"],
    "albert": ["embeddings", *LAYER_0, "layer_1.attention"],
    "opt": [*LAYER_0, "layer_1.attention"],
    "mistral": [*LAYER_0, "layer_1.attention"],
    "mpnet": ["embeddings", *LAYER_0, "layer_1.attention"],
    "deberta-v2": ["embeddings", *LAYER_0, "layer_1.attention"],
    "mobilebert": ["embeddings", *LAYER_0, "layer_1.attention"],
}


@functools.cache
def family_reference(model_type: str, load_tf_model):
    """PyTorch weights copied from the seeded TF model, and the batches."""
    tf_model = load_tf_model(FAMILY_SPECS[model_type])
    batches = make_batches(tf_model, InputOptions(random=6, seq_len=16, batch_size=3, seed=1))
    return PTModel.from_tf(tf_model.model), batches


@pytest.mark.parametrize("model_type", sorted(FAMILY_SPECS))
def test_family_taps_and_isolation_pass_on_a_correct_port(model_type, load_tf_model):
    pt_model, batches = family_reference(model_type, load_tf_model)
    options = CrosscheckOptions(localise="always")
    report = run_crosscheck(load_tf_model(FAMILY_SPECS[model_type]), pt_model, batches, options)
    assert report.passed, [c.name for c in report.failures]
    components = report.details["components"]
    assert [c["name"] for c in components][: len(FAMILY_LAYOUT[model_type])] == (
        FAMILY_LAYOUT[model_type]
    )
    assert all(c["accumulated_ok"] and c["isolated_ok"] is not False for c in components)
    isolated = [c["isolated_rmse"] for c in components if c["isolated_rmse"] is not None]
    assert isolated and max(isolated) < 1e-5  # fed PyTorch's inputs, TF agrees closely


FAMILY_FAULTS = [(t, f.name) for t in sorted(FAMILY_SPECS) for f in catalogue_for(t)]


@pytest.mark.parametrize(("model_type", "fault"), FAMILY_FAULTS)
def test_fault_catalogues_of_tap_families(model_type, fault, load_tf_model):
    pt_model, batches = family_reference(model_type, load_tf_model)
    f = by_name(fault, model_type)
    report = run_crosscheck(f.apply(TFModel.load(FAMILY_SPECS[model_type])), pt_model, batches)
    assert report.passed is False
    d = report.first_divergence
    e = f.expect
    assert (d.hidden_state, d.layer, d.component) == (e.hidden_state, e.layer, e.component), d
    assert e.hint in d.hint, d.hint
    # GPT-2's Conv1D biases are [1, n] in TF and [n] in PyTorch: only real differences
    # are named, never a shape mismatch.
    assert "shape" not in d.hint, d.hint


def test_albert_with_several_layer_groups_is_not_tapped(load_tf_model):
    """Taps record ALBERT's one shared layer per call; other layouts are not claimed."""
    from tfparity.adapters.interfaces.taps import family_of

    config = load_tf_model("tiny:albert").config
    assert family_of(config) is not None
    grouped = config.__class__.from_dict({**config.to_dict(), "num_hidden_groups": 2})
    assert family_of(grouped) is None


def test_crosscheck_command_localises_on_failure_by_default(tmp_path, monkeypatch, capsys):
    """`tfparity crosscheck` runs no taps on a clean model (--localise on_failure, the
    default) and still localises a broken port to the same layer and component as
    --localise always; the JSON and the text say which ran."""
    import json

    from tfparity import cli

    monkeypatch.chdir(tmp_path)
    base = ["crosscheck", "--random", "3", "--seq-len", "8", "--no-reload"]
    assert cli.main([*base, TINY, "--json", "clean.json"]) == 0
    clean = json.loads((tmp_path / "clean.json").read_text())
    assert clean["details"]["localise"] == "on_failure"
    assert clean["details"]["taps"].startswith("skipped") and clean["details"]["components"] == []
    assert "taps: skipped" in capsys.readouterr().out
    broken = by_name("dropped intermediate bias").apply(TFModel.load(TINY))
    broken.model.save_pretrained(tmp_path / "broken")
    seen = {}
    for mode in ("on_failure", "always"):
        args = [*base, "--tf", str(tmp_path / "broken"), "--pt", TINY, "--localise", mode]
        assert cli.main([*args, "--json", f"{mode}.json"]) == 1
        report = json.loads((tmp_path / f"{mode}.json").read_text())
        assert report["details"]["localise"] == mode and report["details"]["taps"] == "ran"
        seen[mode] = report["first_divergence"]
    assert seen["on_failure"] == seen["always"]
    assert (seen["always"]["layer"], seen["always"]["component"]) == (0, "intermediate")


def test_api_options_and_cli_share_one_localise_default():
    """The default lives in tfparity/checks/__init__.py; the API, CrosscheckOptions and
    `tfparity crosscheck` (its default and its choices) all take it from there."""
    import argparse
    import inspect

    from tfparity import api
    from tfparity.checks import DEFAULT_LOCALISE, LOCALISE_MODES
    from tfparity.cli import build_parser

    assert DEFAULT_LOCALISE == "on_failure" and DEFAULT_LOCALISE in LOCALISE_MODES
    assert inspect.signature(api.crosscheck).parameters["localise"].default == DEFAULT_LOCALISE
    assert CrosscheckOptions().localise == DEFAULT_LOCALISE
    parser = build_parser()
    assert parser.parse_args(["crosscheck"]).localise == DEFAULT_LOCALISE
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    (action,) = [a for a in sub.choices["crosscheck"]._actions if a.dest == "localise"]
    assert tuple(action.choices) == LOCALISE_MODES
    with pytest.raises(ValueError, match="'on_failure' or 'always'"):
        api.crosscheck(TINY, localise="sometimes")


def test_a_few_value_leaf_is_judged_with_the_wider_factor_and_the_report_says_so():
    """One sentence through a 2-label classifier: its logits are two values, judged
    with factor 100 (the JSON's bound and a note name it); the hidden states keep 3."""
    (report,) = crosscheck(
        "tiny:bert/sequence-classification",
        inputs=InputOptions(texts=("It rained all day in Lisbon.",)),
        reload=False,
    )
    assert report.passed
    factors = {c.name: c.referee["factor"] for c in report.comparisons if c.referee}
    assert factors["logits"] == 100.0 and factors["hidden_states[1]"] == 3.0
    (note,) = [n for n in report.notes if n.startswith("Judged with a wider factor")]
    assert "logits (2 values: factor 100)" in note
