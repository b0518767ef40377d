"""Every report a command writes renders through the registry keyed by its check
(tfparity/report/__init__.py): ``tfparity.render`` prints what its command prints, the
HTML page holds its verdict, and the pytest assertion message leads with its verdict
and ends with where the full report is.

The reports come from small real runs on tiny models, made once for the module (the
API called in process), and the ``backends`` ones from made-up backend outputs as the
judge's tests make them (numpy only, no backend process). ``sweep`` writes no Report
(its summary is a dict, rendered by :func:`tfparity.report.sweep.render_summary`).
"""

from __future__ import annotations

import html
from dataclasses import replace

import numpy as np
import pytest

import tfparity
from tfparity.report import RENDERERS, assertion_message, render, verdict
from tfparity.report.html import render_html

INPUTS = tfparity.InputOptions(random=2, seq_len=8, batch_size=2, seed=0)
ONE = tfparity.InputOptions(random=1, seq_len=4, batch_size=1, seed=0)
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
def reports(load_tf_model) -> dict:
    """name -> a Report of that command (PASS and FAIL where the FAIL is cheap)."""
    from tfparity.adapters.hf_tf.embedding_parts import default_position_ids, embedding_parts
    from tfparity.checks.crosscheck.quantised import with_quantisation
    from tfparity.checks.diagnose import DiagnoseInputs, check_diagnose
    from tfparity.checks.modes import ModesOptions, check_modes
    from tfparity.orchestration import reference_for

    bert, gpt = load_tf_model("tiny:bert"), load_tf_model("tiny:gpt2/causal-lm")
    batches = tfparity.make_batches(bert, INPUTS)
    parts = embedding_parts(bert)
    word = parts.word[batches[0].input_ids]
    made = {
        "check": tfparity.check_embeds(bert, batches=batches),
        "check-fail": tfparity.check_embeds(
            bert, batches=batches, embeds_fn=lambda b: parts.word[b.input_ids] * 1.05
        ),
        "embeddings": tfparity.check_tying(bert, inputs=INPUTS),
        "positions": tfparity.check_positions(bert, inputs=INPUTS, permutations=2),
        "diagnose": check_diagnose(bert, DiagnoseInputs(batches[0], word)),
        "diagnose-fail": check_diagnose(
            bert,
            DiagnoseInputs(
                batches[0], word + parts.position[default_position_ids(bert, batches[0].input_ids)]
            ),
        ),
        "modes": check_modes(bert, batches, ModesOptions(devices="cpu", modes=("graph",))),
        "backends": _backends(faulty=False),
        "backends-fail": _backends(faulty=True),
        "backends-gradients": _backends(faulty=True, gradients=True),
        "backends-quantised": _quantised_backends(faulty=False),
        "backends-quantised-fail": _quantised_backends(faulty=True),
        "backends-quantised-over": _quantised_backends(over=1.5),
    }
    one = tfparity.make_batches(bert, ONE)  # gradients cost by the token: the fewest
    made["gradients-embeds"], made["gradients"] = tfparity.gradients(bert, batches=one)
    lm_batches = tfparity.make_batches(gpt, INPUTS)
    (crosscheck,) = tfparity.crosscheck(gpt, batches=lm_batches, reload=False)
    made["crosscheck"] = crosscheck
    # --quantize's section, on a "quantised" twin that is the float model itself: the
    # section's shape, every budget met (this module renders; tests/checks judge)
    pt = reference_for("tiny:gpt2/causal-lm")
    made["crosscheck-quantize"] = with_quantisation(crosscheck, gpt, gpt, pt, lm_batches, "int8")
    made["crosscheck-requantisation"] = replace(
        crosscheck, details={**crosscheck.details, "requantisation": REQUANTISATION}
    )
    made["generate"] = tfparity.generate(gpt, new_tokens=2, texts=["Hello there"])
    return made


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

NAMES = [
    "check",
    "check-fail",
    "crosscheck",
    "crosscheck-quantize",
    "crosscheck-requantisation",
    "diagnose",
    "diagnose-fail",
    "embeddings",
    "positions",
    "generate",
    "gradients-embeds",
    "gradients",
    "modes",
    "backends",
    "backends-fail",
    "backends-gradients",
    "backends-quantised",
    "backends-quantised-fail",
    "backends-quantised-over",
]


def _printed(name: str, report) -> str:
    """What the report's command prints: its own renderer, as the command calls it."""
    from tfparity.report import backends, generation, gradients, modes, sections, text

    by_command = {
        "check": text.render,
        "crosscheck": text.render,
        "diagnose": sections.render_diagnose,
        "embeddings": sections.render_embeddings,
        "positions": sections.render_positions,
        "generate": generation.render_generation,
        "gradients": gradients.render_gradients,
        "modes": modes.render_modes,
        "backends": backends.render_report,  # float or quantised, as the command prints
    }
    command = name.split("-")[0]
    return by_command[command](report)


def test_both_verdicts_are_among_the_reports(reports):
    """The module renders passing and failing reports (each way of each renderer)."""
    assert set(reports) == set(NAMES)
    for name in ("check", "diagnose", "backends", "backends-quantised"):
        assert reports[name].passed and not reports[f"{name}-fail"].passed, name
    assert not reports["backends-gradients"].passed
    over = reports["backends-quantised-over"]
    assert not over.passed and "layer" not in over.details["first_divergence"]  # no layer parts
    assert "quantisation" in reports["crosscheck-quantize"].details
    assert "quantisation" in reports["backends-quantised"].details


@pytest.mark.parametrize("name", NAMES)
def test_render_prints_what_the_command_prints_and_ends_with_the_verdict(reports, name):
    report = reports[name]
    assert report.check in RENDERERS  # registered, not the default for a check of your own
    text = tfparity.render(report)
    assert text == render(report) == _printed(name, report)
    lines = text.splitlines()
    assert lines[0] == f"tfparity {report.check} · {report.model}"
    assert lines[-1] == verdict(report)
    assert lines[-1].startswith("PASS " if report.passed else "FAIL ")
    assert tfparity.render(report, verbose=True).splitlines()[-1] == lines[-1]


@pytest.mark.parametrize("name", NAMES)
def test_html_holds_the_report_s_verdict(reports, name):
    report = reports[name]
    page = render_html([report])
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert f"<p>{html.escape(verdict(report))}</p>" in page
    assert ('<span class="fail">FAIL</span>' in page) is not report.passed


@pytest.mark.parametrize("name", NAMES)
def test_assertion_message_leads_with_the_verdict_and_ends_with_the_full_report(reports, name):
    report = reports[name]
    lines = assertion_message([report], FULL).splitlines()
    first = verdict(report)
    d = report.first_divergence
    if report.check not in ("backends", "generate") and d is not None:
        assert lines[0].endswith(f": FAIL {report.check}, {report.model}")  # the place first
    else:
        assert lines[0].startswith(first), lines[0]
    assert lines[-1] == FULL
    assert len(lines) <= 40


def test_render_of_a_backends_report_is_its_layer_table(reports):
    """``tfparity.render`` on a ``backends`` report (it raised KeyError 'hidden_state',
    reading the layer x backend table as the cross-check's)."""
    text = tfparity.render(reports["backends-fail"])
    assert "first divergence: backend jax, layer layer_5 (one)" in text
    assert all(any(line.startswith(f"{n} ") for line in text.splitlines()) for n in LAYERS)


def test_the_backends_assertion_shows_the_rows_around_the_first_divergence(reports):
    lines = assertion_message([reports["backends-fail"]], FULL).splitlines()
    assert lines[0].startswith("FAIL backends: backend jax parts from")
    shown = [n for n in LAYERS if any(line.startswith(f"{n} ") for line in lines)]
    assert shown == LAYERS[2:9]  # three either side of layer_5
    assert "first divergence: backend jax, layer layer_5 (one)" in lines
    passing = assertion_message([reports["backends"]], FULL).splitlines()
    assert passing[0].startswith("PASS backends") and not any("divergence" in x for x in passing)


def test_the_quantised_backends_assertion_has_its_rows_and_budget(reports):
    lines = assertion_message([reports["backends-quantised-fail"]], FULL).splitlines()
    assert lines[0].startswith("FAIL backends:")
    assert lines[1].startswith("each cell: max abs diff to the nearest other backend")
    assert any(line.startswith("int8 budget, quantised vs the float model") for line in lines)
    assert [n for n in LAYERS if any(line.startswith(f"{n} ") for line in lines)] == LAYERS[2:9]


def test_a_check_of_your_own_renders_as_a_tensor_check(reports):
    mine = replace(reports["check-fail"], check="mine")
    assert tfparity.render(mine).splitlines()[-1].startswith("FAIL mine: ")
    assert assertion_message([mine], FULL).splitlines()[-1] == FULL


@pytest.mark.parametrize("name", NAMES)
def test_the_plot_draws_every_report_that_has_layers(reports, name):
    """--plot and the HTML's image: a backends report by backend, any other by hidden
    state; a report without either has no plot."""
    from tfparity.report.plot import backend_series, layer_series, plottable

    report = reports[name]
    backends = backend_series(report)
    assert (backends is not None) is (report.check == "backends")
    assert backends is None or layer_series(report) is None
    assert bool(plottable([report])) is (backends is not None or layer_series(report) is not None)
