"""The cross-check's float64 runs: ``--referee lazy`` stops once the batches left cannot
change a verdict, and its verdicts are ``full``'s, on a clean port and on broken ones."""

from __future__ import annotations

import argparse
import inspect

import pytest

from tfparity import InputOptions
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.reference.pt_model import PTModel
from tfparity.api import make_batches
from tfparity.checks import DEFAULT_REFEREE_RUNS, REFEREE_RUNS
from tfparity.checks.crosscheck.check import CrosscheckOptions, crosscheck
from tfparity.testing import by_name

TINY = "tiny:bert"
LAZY, FULL = CrosscheckOptions(referee_runs="lazy"), CrosscheckOptions(referee_runs="full")


@pytest.fixture(scope="module")
def reference(load_tf_model):
    """PyTorch tiny:bert and eight batches: enough for float64 to stop early."""
    tf_model = load_tf_model(TINY)
    batches = make_batches(tf_model, InputOptions(random=24, seq_len=16, batch_size=3, seed=2))
    return PTModel.from_tf(tf_model.model), batches


def verdicts(report) -> dict[str, bool]:
    return {c.name: c.passed for c in report.comparisons}


def test_lazy_referee_stops_early_on_a_clean_port_with_full_verdicts(reference, load_tf_model):
    pt_model, batches = reference
    tf_model = load_tf_model(TINY)
    lazy, full = (crosscheck(tf_model, pt_model, batches, o) for o in (LAZY, FULL))
    assert lazy.passed and full.passed and verdicts(lazy) == verdicts(full)
    assert 1 <= lazy.details["float64_batches"] < len(batches)
    assert full.details["float64_batches"] == len(batches)
    assert any("float64 referee ran for" in n for n in lazy.notes)
    assert not any("float64 referee ran for" in n for n in full.notes)
    refereed = [c for c in lazy.comparisons if c.judge == "referee"]
    assert refereed and all(c.referee["actual_rmse"] > 0 for c in refereed)


@pytest.mark.parametrize("fault", ["gelu_new instead of gelu", "LayerNorm epsilon 1e-5 vs 1e-12"])
def test_lazy_referee_runs_every_batch_on_a_broken_port_and_localises_alike(reference, fault):
    pt_model, batches = reference
    lazy, full = (
        crosscheck(by_name(fault).apply(TFModel.load(TINY)), pt_model, batches, o)
        for o in (LAZY, FULL)
    )
    assert not lazy.passed and verdicts(lazy) == verdicts(full)
    assert lazy.details["float64_batches"] == len(batches)
    assert lazy.first_divergence == full.first_divergence
    assert "run to run" not in lazy.first_divergence.hint  # deterministic: TF ran once more


def test_a_fault_in_the_last_batch_only_keeps_float64_running(reference, load_tf_model):
    """The first batches settle nothing: the last batch's difference is in the bound."""
    pt_model, batches = reference
    tf_model = load_tf_model(TINY)
    traces = [tf_model.run(b) for b in batches]
    traces[-1].arrays["last_hidden_state"] = traces[-1]["last_hidden_state"] + 1e-3
    report = crosscheck(tf_model, pt_model, batches, LAZY, tf_traces=traces)
    assert not report.passed and report.details["float64_batches"] == len(batches)
    (failed,) = [c.name for c in report.comparisons if not c.passed]
    assert failed == "last_hidden_state"


def test_api_options_and_cli_share_one_referee_default():
    """The default lives in tfparity/checks/__init__.py; the API, CrosscheckOptions,
    `tfparity check` and `tfparity crosscheck` take it and its choices from there."""
    from tfparity import api
    from tfparity.cli import build_parser

    assert DEFAULT_REFEREE_RUNS == "lazy" and REFEREE_RUNS == ("lazy", "full")
    assert inspect.signature(api.crosscheck).parameters["referee"].default == "lazy"
    assert CrosscheckOptions().referee_runs == DEFAULT_REFEREE_RUNS
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("check", "crosscheck"):
        assert parser.parse_args([command]).referee == DEFAULT_REFEREE_RUNS
        (action,) = [a for a in sub.choices[command]._actions if a.dest == "referee"]
        assert tuple(action.choices) == REFEREE_RUNS
    with pytest.raises(ValueError, match="'lazy' or 'full'"):
        api.crosscheck(TINY, referee="half")


def test_a_tap_whose_shapes_differ_is_left_to_the_hidden_states():
    """A wrong reference (a BERT export named with a GPT-2 --pt) gives sub-layers of
    other widths: they are not refereed (the hidden states' comparison says why), and
    the taps both sides shape alike still are."""
    import numpy as np

    from tfparity.checks.crosscheck.localisation import components_of
    from tfparity.checks.crosscheck.runs import Runs
    from tfparity.compare import Referee

    rng = np.random.default_rng(0)
    same = rng.normal(size=(1, 4, 8))
    runs = Runs(
        tf_taps=[{"layer_0.intermediate": np.zeros((1, 4, 32)), "layer_0.output": same * 1.05}],
        pt_taps=[{"layer_0.intermediate": np.zeros((1, 4, 16)), "layer_0.output": same}],
        pt64_taps=[{"layer_0.intermediate": np.zeros((1, 4, 16)), "layer_0.output": same}],
        isolated=[{}],
    )
    found = components_of(runs, [np.ones((1, 4))], Referee())
    assert [c.name for c in found] == ["layer_0.output"]
    assert not found[0].accumulated.passed  # TF's ×1.05 is still judged
