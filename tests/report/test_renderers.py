"""Every report a command writes renders through the registry keyed by its check
(tfparity/report/__init__.py): ``tfparity.render`` prints what its command printed, the
HTML page holds its verdict, and the pytest assertion message leads with its headline
and ends with where the full report is.

The reports are small real runs of every command, read back from the JSON they wrote
(tests/report/data/, made by scripts/report_samples.py; no model runs here), and, for
the message's window and the budget section, made-up ``backends`` outputs as the
judge's tests make them (numpy only, no backend process). ``sweep`` writes no Report:
``tfparity.render`` takes its result (its summary.json and output folder).
"""

from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tfparity
from tfparity.report import RENDERERS, assertion_message, render, renderer_key, verdict
from tfparity.report.html import render_html, write_html

# every stored sample (tests/report/test_report_samples.py: one per command, and fresh)
SAMPLES = sorted(p.stem for p in (Path(__file__).parent / "data").glob("*.json"))
REPORTS = [name for name in SAMPLES if name != "sweep"]
BACKENDS = ["tensorflow", "jax", "torch"]
RNG = np.random.default_rng(0)
# ten layers: the assertion message shows the rows around the first divergence only
LAYERS = [f"layer_{k}" for k in range(10)]
TRUTH = {name: RNG.standard_normal((2, 8, 16)) for name in LAYERS}
FULL = "full report: here"


def _runs(scale: dict[str, float]) -> dict:
    """Every backend at float32; a backend in ``scale`` that much off from layer_5 on."""
    return {
        b: {
            n: (t * (scale.get(b, 1.0) if k >= 5 else 1.0)).astype(np.float32)
            for k, (n, t) in enumerate(TRUTH.items())
        }
        for b in BACKENDS
    }


def _backends(faulty: bool, gradients: bool = False):
    from tfparity.cross_backend.gradients import BackendGradients, add_gradients
    from tfparity.cross_backend.judge import BackendOutputs, check_backends

    runs = _runs({"jax": 1.001} if faulty else {})
    report = check_backends(BackendOutputs("made-up", runs, TRUTH, "tensorflow"))
    if gradients:
        rows = {f"{n}:output": t for n, t in TRUTH.items()}
        grads = BackendGradients(
            float32={b: {r: run[r.split(":")[0]] for r in rows} for b, run in runs.items()},
            truth=rows,
            layer_of={r: r.split(":")[0] for r in rows},
        )
        report = add_gradients(report, grads)
    return report


def _quantised_backends(faulty: bool = False, over: float = 1.001):
    """A made-up int8 run: the backends agree with each other (but ``faulty``: jax off
    from layer_5 on), each ``over`` times the float model's truth (1.001: within the
    int8 budget; 1.5: over it, where no layer parts)."""
    from tfparity.cross_backend.quantised import QuantisedOutputs, check_quantised_backends

    runs = _runs({"jax": 1.01} if faulty else {})
    quantised = {
        b: {n: (t * over).astype(np.float32) for n, t in run.items()} for b, run in runs.items()
    }
    q = QuantisedOutputs("made-up", "int8", quantised, "tensorflow", TRUTH, "tensorflow")
    return check_quantised_backends(q)


@pytest.fixture(scope="module")
def made() -> dict:
    """Made-up backends reports (the layer window, the gradients, a budget no layer
    parts over) and a stored file's exact check on a real crosscheck report."""
    return {
        "backends-fail": _backends(faulty=True),
        "backends-gradients": _backends(faulty=True, gradients=True),
        "backends-quantised-fail": _quantised_backends(faulty=True),
        "backends-quantised-over": _quantised_backends(over=1.5),
    }


# A stored quantised file's exact check (docs/json-schema.md's details.requantisation),
# one variable off: its row and effect.
REQUANTISATION = {
    "source": "tiny:gpt2/causal-lm",
    "mode": "int8",
    "layers": {"int8": 4},
    "skipped": None,
    "reproduces": False,
    "compared": 8,
    "identical": 7,
    "output": "logits",
    "output_error": 0.08,
    "differences": [
        {
            "path": "h_1/mlp/c_proj/kernel_scale",
            "block": 1,
            "detail": "scaled by 1.5",
            "effect": {"output": "logits", "error": 0.08, "with_fresh": 0.0, "drop": 0.08},
        }
    ],
}


def test_the_samples_hold_both_verdicts_of_the_checks_that_fail_cheaply(sample_reports, made):
    """Each way of each renderer: passing and failing reports."""
    for name in ("crosscheck", "generate", "backends", "backends-quantised"):
        assert all(r.passed for r in sample_reports[name]), name
        assert not any(r.passed for r in sample_reports[f"{name}-fail"]), name
    assert not sample_reports["diagnose"][0].passed
    quantised = sample_reports["backends-quantised"][0]
    assert renderer_key(quantised) == "backends:quantised"
    assert renderer_key(sample_reports["backends"][0]) == "backends"
    over = made["backends-quantised-over"]
    assert not over.passed and "layer" not in over.details["first_divergence"]  # no layer parts


@pytest.mark.parametrize("name", REPORTS)
def test_render_prints_what_the_command_printed(sample_reports, sample_printed, name):
    """Each report read back from its command's JSON renders as the command printed it."""
    for report in sample_reports[name]:
        assert renderer_key(report) in RENDERERS  # not the default for a check of your own
        text = tfparity.render(report)
        assert text == render(report)
        assert text in sample_printed[name]
        lines = text.splitlines()
        assert lines[0].startswith(f"tfparity {report.check} · {report.model}")
        assert lines[-1] == verdict(report)
        assert lines[-1].startswith("PASS " if report.passed else "FAIL ")
        assert tfparity.render(report, verbose=True).splitlines()[-1] == lines[-1]


def test_the_sweep_summary_renders_what_the_command_printed(sample_json, sample_printed):
    """A sweep writes a summary, not a Report: ``tfparity.render`` takes its result."""
    from pathlib import Path

    from tfparity.sweep import SweepResult

    result = SweepResult(sample_json["sweep"], Path("sweep"))
    assert tfparity.render(result) == sample_printed["sweep"].rstrip("\n")
    assert tfparity.render(result, verbose=True) == tfparity.render(result)


@pytest.mark.parametrize("name", REPORTS)
def test_the_html_page_holds_each_report_s_verdict(sample_reports, tmp_path, name):
    """What --html writes for the command's reports."""
    reports = sample_reports[name]
    write_html(reports, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for report in reports:
        assert f"<p>{html.escape(verdict(report))}</p>" in page
    assert ('<span class="fail">FAIL</span>' in page) is not all(r.passed for r in reports)


@pytest.mark.parametrize("name", REPORTS)
def test_the_assertion_message_leads_with_the_headline_and_ends_with_the_full_report(
    sample_reports, name
):
    reports = sample_reports[name]
    lines = assertion_message(reports, FULL).splitlines()
    first = next((r for r in reports if not r.passed), reports[0])
    d = first.first_divergence
    if renderer_key(first) in ("generate", "backends", "backends:quantised") or d is None:
        assert lines[0].startswith(verdict(first)), lines[0]
    else:  # the place first: pytest's summary line cuts at the terminal's width
        assert lines[0].endswith(f": FAIL {first.check}, {first.model}")
        assert lines[0].startswith(f"layer {d.layer}" if isinstance(d.layer, int) else d.layer)
    assert lines[-1] == FULL
    assert len(lines) <= 40


def test_the_cross_check_s_message_names_the_failing_layer_first(sample_reports):
    (report,) = sample_reports["crosscheck-fail"]
    lines = assertion_message([report], FULL).splitlines()
    assert lines[0].startswith("layer 1 ")  # tfparity.testing.perturb_ffn(port, 1, 1.5)
    assert len(lines[0].split(": FAIL")[0]) < 60
    assert "tensors are not close!" in "\n".join(lines)


def test_a_stored_file_s_exact_check_renders_in_the_cross_check(sample_reports):
    (report,) = sample_reports["crosscheck-fail"]
    report = replace(report, details={**report.details, "requantisation": REQUANTISATION})
    text = tfparity.render(report)
    assert "h_1/mlp/c_proj/kernel_scale" in text
    assert "h_1/mlp/c_proj/kernel_scale" in render_html([report])


def test_render_of_a_backends_report_is_its_layer_table(made):
    """``tfparity.render`` on a ``backends`` report (it raised KeyError 'hidden_state',
    reading the layer x backend table as the cross-check's)."""
    text = tfparity.render(made["backends-fail"])
    assert "first divergence: backend jax, layer layer_5 (one)" in text
    assert all(any(line.startswith(f"{n} ") for line in text.splitlines()) for n in LAYERS)


def test_the_backends_assertion_shows_the_rows_around_the_first_divergence(made, sample_reports):
    lines = assertion_message([made["backends-fail"]], FULL).splitlines()
    assert lines[0].startswith("FAIL backends: backend jax parts from")
    shown = [n for n in LAYERS if any(line.startswith(f"{n} ") for line in lines)]
    assert shown == LAYERS[2:9]  # three either side of layer_5
    assert "first divergence: backend jax, layer layer_5 (one)" in lines
    passing = assertion_message(sample_reports["backends"], FULL).splitlines()
    assert passing[0].startswith("PASS backends") and not any("divergence" in x for x in passing)


def test_the_quantised_backends_assertion_has_its_rows_and_budget(made):
    lines = assertion_message([made["backends-quantised-fail"]], FULL).splitlines()
    assert lines[0].startswith("FAIL backends:")
    assert lines[1].startswith("each cell: max abs diff to the nearest other backend")
    assert any(line.startswith("int8 budget, quantised vs the float model") for line in lines)
    assert [n for n in LAYERS if any(line.startswith(f"{n} ") for line in lines)] == LAYERS[2:9]


@pytest.mark.parametrize("name", ["backends-gradients", "backends-quantised-over"])
def test_a_made_up_backends_report_renders_everywhere(made, name):
    """The gradients' section, and a budget no layer parts over (the HTML and the plot
    raised KeyError 'layer')."""
    report = made[name]
    assert tfparity.render(report).splitlines()[-1] == verdict(report)
    assert f"<p>{html.escape(verdict(report))}</p>" in render_html([report])
    assert assertion_message([report], FULL).splitlines()[-1] == FULL


def test_a_check_of_your_own_renders_as_a_tensor_check(sample_reports):
    mine = replace(sample_reports["crosscheck-fail"][0], check="mine")
    assert tfparity.render(mine).splitlines()[-1].startswith("FAIL mine: ")
    assert assertion_message([mine], FULL).splitlines()[-1] == FULL


@pytest.mark.parametrize("name", [*REPORTS, "backends-quantised-over"])
def test_the_plot_draws_every_report_that_has_layers(sample_reports, made, name):
    """--plot and the HTML's image: a backends report by backend, any other by hidden
    state; a report without either has no plot."""
    from tfparity.report.plot import backend_series, layer_series, plottable

    for report in sample_reports.get(name) or [made[name]]:
        backends = backend_series(report)
        assert (backends is not None) is (report.check == "backends")
        assert backends is None or layer_series(report) is None
        drawn = backends is not None or layer_series(report) is not None
        assert bool(plottable([report])) is drawn
