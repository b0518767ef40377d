"""--html and --plot: a self-contained page with the tables and the embedded plot, a
valid PNG, and the paths without matplotlib (--plot exit 2, --html without image)."""

from __future__ import annotations

import argparse
import base64
import re
import struct
import sys

import numpy as np
import pytest

from tfparity.cli import main
from tfparity.compare import Comparison, compare_arrays
from tfparity.report import Divergence, Report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC
    return struct.unpack(">II", data[16:24])  # the IHDR chunk: width, height


def layer_row(k: int, diff: float, passed: bool = True) -> dict:
    return {
        "hidden_state": k,
        "layer": "embeddings" if k == 0 else k - 1,
        "max_abs_diff": diff,
        "mean_abs_diff": diff / 10,
        "cosine": 1.0,
        "rmse_vs_fp64": diff / 5,
        "reference_rmse_vs_fp64": 1e-7,
        "accumulated_ok": passed,
        "isolated_ok": None if k == 0 else passed,
        "isolated_rmse": None if k == 0 else diff / 8,
        "passed": passed,
    }


def comparison(name: str, diff: float) -> Comparison:
    """A real comparison of arrays that differ by ``diff`` everywhere."""
    expected = np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 4, 8)
    return compare_arrays(expected + np.float32(diff), expected, name=name)


@pytest.fixture
def failing_crosscheck() -> Report:
    """A cross-check report with a divergence at hidden state 2 and an exact zero."""
    rows = [layer_row(0, 0.0), layer_row(1, 1e-6), layer_row(2, 0.25, False)]
    return Report(
        check="crosscheck",
        model="tiny:bert",
        passed=False,
        comparisons=[
            comparison("hidden_states[0]", 0.0),
            comparison("hidden_states[1]", 1e-6),
            comparison("hidden_states[2]", 0.25),
            comparison("last_hidden_state", 0.25),
        ],
        first_divergence=Divergence(2, 1, "output", "weight x.bias is all zeros in TF"),
        details={"compares": "TensorFlow (actual) vs PyTorch (expected)", "layers": rows},
    )


def test_png_is_valid_with_sensible_size(failing_crosscheck):
    pytest.importorskip("matplotlib")
    from tfparity.report.plot import png_bytes

    data = png_bytes([failing_crosscheck])
    width, height = png_size(data)
    assert 800 <= width <= 2000 and 300 <= height <= 1000
    assert len(data) > 10_000
    two = png_bytes([failing_crosscheck, failing_crosscheck])  # one row per report
    assert png_size(two)[1] > 1.8 * height


def test_html_holds_the_tables_the_divergence_and_the_embedded_png(failing_crosscheck):
    pytest.importorskip("matplotlib")
    from tfparity.report.html import render_html
    from tfparity.report.plot import png_bytes

    page = render_html([failing_crosscheck], {0: png_bytes([failing_crosscheck])})
    assert page.startswith("<!DOCTYPE html>")
    rows = re.findall(r'<tr class="(ok|fail)">', page)
    assert rows.count("fail") == 2 and rows.count("ok") == 2  # 3 layers + last_hidden_state
    assert '<td class="num">embeddings</td>' in page and '<td class="num">DIVERGES</td>' in page
    assert '<td class="num">0.25</td>' in page
    assert "first divergence:</b> hidden_states[2] · layer 1 · component output" in page
    assert "weight x.bias is all zeros in TF" in page
    image = re.search(r'<img [^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert image and base64.b64decode(image.group(1)).startswith(PNG_MAGIC)
    assert "<script" not in page and "http" not in page  # self-contained


def test_html_reads_in_an_800px_window(failing_crosscheck):
    """No page-wide sideways scroll: each table scrolls in its own box; numbers stay on
    one line; text cells (a problem, a path) may wrap."""
    from dataclasses import replace
    from html.parser import HTMLParser

    from tfparity.report.html import render_html

    problem = replace(comparison("pooler_output", 1.0), problem="shape [2, 384] vs [2, 768]")
    failing_crosscheck.comparisons.append(problem)
    failing_crosscheck.details.update(seconds=1.25, path="/a/very/long/" + "x" * 200)
    page = render_html([failing_crosscheck])
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    style = page.split("<style>", 1)[1].split("</style>", 1)[0]
    rules = {k.strip(): v for k, v in re.findall(r"([^{}]+?)\s*\{([^}]*)\}", style)}
    assert "overflow-x: auto" in rules["div.wide"] and "max-width: 100%" in rules["div.wide"]
    assert "white-space: nowrap" in rules["td.num, th"]
    assert not re.search(r"(?<!max-)width:\s*\d{3,}px", style)  # nothing wider than a window

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.open: list[str] = []
            self.cells: list[tuple[str, str]] = []  # (class, text)
            self.tables_in_a_box = self.tables = 0

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "table":
                self.tables += 1
                self.tables_in_a_box += self.open[-1:] == ["div.wide"]
            if tag == "td":
                self.cells.append((attrs.get("class") or "", ""))
            self.open.append(f"{tag}.{attrs.get('class')}" if tag == "div" else tag)

        def handle_endtag(self, tag):
            self.open.pop()

        def handle_data(self, data):
            if self.open and self.open[-1] == "td":
                cls, text = self.cells[-1]
                self.cells[-1] = (cls, text + data)

    cells = Cells()
    cells.feed(page)
    assert cells.tables >= 3 and cells.tables_in_a_box == cells.tables
    number = re.compile(r"^-?\d[\d.]*(e[-+]\d+)?(/\d+)?$")
    numeric = [(cls, text) for cls, text in cells.cells if number.match(text)]
    assert len(numeric) > 20 and all(cls == "num" for cls, _ in numeric), numeric
    texts = {text: cls for cls, text in cells.cells}
    assert texts["FAIL: shape [2, 384] vs [2, 768]"] != "num"  # a sentence may wrap
    assert texts["/a/very/long/" + "x" * 200] == "name"  # and a path (overflow-wrap)


def test_html_escapes_text(failing_crosscheck):
    from tfparity.report.html import render_html

    failing_crosscheck.model = "<b>x</b>"
    assert "<b>x</b>" not in render_html([failing_crosscheck])
    assert "&lt;b&gt;x&lt;/b&gt;" in render_html([failing_crosscheck])


def test_without_matplotlib_plot_is_exit_2_and_html_says_why(
    monkeypatch, tmp_path, capsys, failing_crosscheck
):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    code = main(["crosscheck", "tiny:bert", "--plot", str(tmp_path / "p.png")])
    assert code == 2
    err = capsys.readouterr().err
    assert "matplotlib" in err and "pip install 'tfparity[plot]'" in err
    assert not (tmp_path / "p.png").exists()

    from tfparity.commands.common import write_outputs

    html = tmp_path / "r.html"
    write_outputs(argparse.Namespace(plot=None, html=str(html)), [failing_crosscheck])
    page = html.read_text()
    assert "Plot not included: matplotlib is not installed" in page
    assert "data:image/png" not in page and '<td class="num">DIVERGES</td>' in page


def test_plot_writes_the_format_its_extension_names_or_refuses(
    tmp_path, capsys, failing_crosscheck
):
    pytest.importorskip("matplotlib")
    from tfparity.report.plot import write_plot

    starts = {"p.svg": b"<?xml", "p.PDF": b"%PDF-"}  # PNG: test_check_writes_html_plot...
    for name, magic in starts.items():
        write_plot([failing_crosscheck], tmp_path / name)
        assert (tmp_path / name).read_bytes().startswith(magic), name
    assert b"<svg" in (tmp_path / "p.svg").read_bytes()[:1000]
    for name in ("p.jpg", "plot"):  # refused before any model loads, naming the formats
        assert main(["check", "tiny:bert", "--plot", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert f"--plot {tmp_path / name}" in err and "use .png, .svg, .pdf" in err, err
        assert not (tmp_path / name).exists()


def test_check_writes_html_plot_and_golden_file(tmp_path):
    """The real thing on tiny:bert: check (embeds + cross-check) with every output."""
    pytest.importorskip("matplotlib")
    from tfparity.golden import load_reference

    html, png, npz = tmp_path / "r.html", tmp_path / "r.png", tmp_path / "g.npz"
    args = ["check", "tiny:bert", "--random", "3", "--seq-len", "10", "--batch-size", "2"]
    code = main([*args, "--html", str(html), "--plot", str(png), "--save-outputs", str(npz)])
    assert code == 0
    width, height = png_size(png.read_bytes())
    assert height > 700  # two rows: the embeds check and the cross-check
    page = html.read_text()
    assert page.count("data:image/png;base64,") == 2
    assert "<h2>embeds · tiny:bert: " in page and "<h2>crosscheck · tiny:bert: " in page
    golden = load_reference(npz)
    assert len(golden.runs) == 2 and golden.tapped
    assert "layer_1.intermediate" in golden.runs[0].fp64_taps


# ----------------------------------------------------------------------------- text


def refereed(c: Comparison, actual_rmse: float, allowed_rmse: float) -> Comparison:
    """``c`` as the cross-check's float64 referee judges it (factor 3, floor 1e-7)."""
    from dataclasses import replace

    bound = {"actual_rmse": actual_rmse, "reference_rmse": 1e-7, "allowed_rmse": allowed_rmse}
    referee = {**bound, "factor": 3.0, "floor": 1e-7}
    return replace(c, judge="referee", passed=actual_rmse <= allowed_rmse, referee=referee)


def test_a_failure_block_names_its_judge_tolerance_or_referee(failing_crosscheck):
    from tfparity.report.text import render

    by_tolerance = comparison("hidden_states[2]", 0.25).message()
    assert "Judge: tolerance, atol 1e-05 and rtol 1.3e-06" in by_tolerance
    assert "(up to 1e-05 allowed)" in by_tolerance and "referee" not in by_tolerance

    by_referee = refereed(comparison("hidden_states[2]", 0.25), 0.05, 4e-7).message()
    assert (
        "Judge: float64 referee, RMSE to float64 0.05 (over 4e-07 allowed = factor 3 x "
        "expected's 1e-07 + floor 1e-07 x RMS)"
    ) in by_referee
    assert "allowed)" not in by_referee.replace("allowed = ", "")  # no atol/rtol bound
    assert re.search(r"Greatest absolute difference: 0.25 at index \(.*\)\n", by_referee)

    failing_crosscheck.comparisons = [
        refereed(c, 0.05, 4e-7) if c.max_abs_diff > 0.1 else c
        for c in failing_crosscheck.comparisons
    ]
    text = render(failing_crosscheck, verbose=True)
    assert "Judge: float64 referee, RMSE to float64 0.05" in text
    assert "Judge: tolerance" not in text


def test_identical_tensors_get_one_failure_block_naming_both(failing_crosscheck):
    from tfparity.report.text import render

    for verbose in (False, True):
        text = render(failing_crosscheck, verbose=verbose)
        assert text.count("tensors are not close!") == 1
        assert "hidden_states[2] = last_hidden_state: tensors are not close!" in text


def test_assertion_message_stays_short_on_a_deep_model():
    """A 24-layer model failing from layer 3 on, with many failing outputs: the message
    keeps the verdict first, a window of the layer table, three output rows, one block,
    and says where the rest is."""
    from tfparity.report import assertion_message

    diffs = [0.0] * 4 + [0.5 + k / 100 for k in range(4, 25)]
    rows = [layer_row(k, diff, k < 4) for k, diff in enumerate(diffs)]
    hidden = [comparison(f"hidden_states[{k}]", diff) for k, diff in enumerate(diffs)]
    outputs = [comparison(f"out{i}", 0.1 * (i + 1)) for i in range(6)]
    report = Report(
        check="crosscheck",
        model="big",
        passed=False,
        comparisons=[*hidden, comparison("last_hidden_state", diffs[-1]), *outputs],
        first_divergence=Divergence(4, 3, "attention", "a hint"),
        details={"judge": "tolerance", "reference": "PyTorch big", "layers": rows},
    )
    lines = assertion_message([report, report], "full report: here").splitlines()
    assert lines[0] == "layer 3 attention diverges (hidden_states[4]): FAIL crosscheck, big"
    assert lines[1] == "hint: a hint"
    assert len(lines) <= 25
    assert (
        "(in the full report: 22 more hidden states, 19 failing; 5 more failing tensors)" in lines
    )
    assert "last_hidden_state = hidden_states[24]" in "\n".join(lines)  # one row for both
    assert sum("tensors are not close!" in line for line in lines) == 1
    assert lines[-2:] == ["also " + lines[0], "full report: here"]


# ----------------------------------------------------------------------------- verdict lines


def outputs_report(*comparisons: Comparison) -> Report:
    return Report(
        check="crosscheck",
        model="tiny:bert",
        passed=all(c.passed for c in comparisons),
        comparisons=list(comparisons),
    )


def test_a_failing_verdict_headlines_a_shape_mismatch_not_a_passing_tensor():
    """The failing tensor compared no values (max abs diff 0): the line used to quote the
    passing hidden state's difference instead."""
    from tfparity.report import assertion_message
    from tfparity.report.brief import headline
    from tfparity.report.text import render, verdict_line

    ones = np.ones((5, 3), np.float32)
    logits = compare_arrays(ones, np.ones((5, 2), np.float32), name="logits")
    report = outputs_report(comparison("hidden_states[2]", 1e-6), logits)
    line = "FAIL crosscheck: 1 of 2 tensors differ; logits: shape [5, 3] vs [5, 2]"
    assert verdict_line(report) == line
    assert render(report).splitlines()[-1] == line
    assert headline(report) == line + " (tiny:bert)"
    assert (
        assertion_message([report], "full report: here")
        .splitlines()[1]
        .startswith("1 of 2 tensors differ; logits: shape [5, 3] vs [5, 2]")
    )


def test_a_failing_verdict_headlines_a_missing_output_or_dtype_mismatch():
    from tfparity.compare import compare_outputs
    from tfparity.report.text import verdict_line

    a = {"last_hidden_state": np.ones((2, 4), np.float32)}
    b = {**a, "logits": np.ones((2, 3), np.float32)}
    report = outputs_report(*compare_outputs(a, b))
    assert verdict_line(report) == (
        "FAIL crosscheck: 1 of 2 tensors differ; output 'logits' is missing from the actual side"
    )
    half = compare_arrays(np.ones(3, np.float16), np.ones(3, np.float32), name="logits")
    assert verdict_line(outputs_report(half)) == (
        "FAIL crosscheck: 1 of 1 tensor differs; logits: dtype float16 vs float32"
    )


def test_a_failing_verdict_names_the_failing_tensor_not_a_larger_passing_one():
    """Under the referee a tensor may pass with a larger difference than one that fails."""
    from tfparity.report.text import verdict_line

    passing = refereed(comparison("hidden_states[1]", 0.5), 1e-7, 4e-7)
    failing = refereed(comparison("hidden_states[2]", 0.25), 0.05, 4e-7)
    report = outputs_report(passing, failing)
    assert report.worst().name == "hidden_states[2]"
    assert verdict_line(report) == (
        "FAIL crosscheck: 1 of 2 tensors differ; max abs diff 0.25 (hidden_states[2])"
    )


def test_a_passing_verdict_is_unchanged():
    from tfparity.report.text import verdict_line

    report = outputs_report(comparison("hidden_states[1]", 0.0), comparison("pooler", 1e-6))
    assert report.passed
    assert re.fullmatch(
        r"PASS crosscheck: 2 tensors compared; max abs diff [\d.e-]+ \(pooler\)",
        verdict_line(report),
    )
    exact = outputs_report(comparison("hidden_states[1]", 0.0))
    assert verdict_line(exact) == "PASS crosscheck: 1 tensor compared; max abs diff 0"


def test_the_assertion_headline_puts_the_divergence_before_the_model(failing_crosscheck):
    """pytest's summary line cuts at the terminal's width: a long model path first used
    to push the divergence out of it."""
    from tfparity.report import assertion_message

    failing_crosscheck.model = "/home/someone/checkpoints/" + "very-long-name-" * 4
    first = assertion_message([failing_crosscheck], "full report: here").splitlines()[0]
    assert first.startswith("layer 1 output diverges (hidden_states[2]): FAIL crosscheck, /home")
    assert first.endswith(f", {failing_crosscheck.model}")


def test_a_divergence_headline_names_the_place_first_whatever_it_is():
    from tfparity.report.brief import divergence_headline
    from tfparity.results import Divergence

    cases = [
        (Divergence(0, "embeddings", "embeddings"), "embeddings diverge (hidden_states[0])"),
        (Divergence(3, 2, None), "layer 2 diverges (hidden_states[3]; sub-layers not tapped)"),
        (Divergence(None, "head", "head"), "head diverges (past the last hidden state)"),
        (Divergence(None, "pooler", "pooler"), "pooler diverges (past the last hidden state)"),
        (Divergence(None, "decoder", None), "decoder diverges"),
        (
            Divergence(None, "output", None),
            "the outputs diverge (no hidden state compared, so not localised to a layer)",
        ),
    ]
    for divergence, said in cases:
        assert divergence_headline(divergence) == said


def test_a_headline_keeps_the_capitals_of_a_name_that_starts_the_problem():
    """A problem's first word is lower-cased inside the verdict line ("the checkpoint"),
    never a name with capitals inside it ("PyTorch", "TF")."""
    from tfparity.compare import Comparison

    base = dict(name="grad:w", shape=[2], expected_shape=[2], dtype="float32")
    base |= dict(expected_dtype="float32", atol=1e-5, rtol=1.3e-6)
    named = Comparison.failed("PyTorch differentiates it, TF has no gradient for it.", **base)
    assert named.headline() == "grad:w: PyTorch differentiates it, TF has no gradient for it"
    plain = Comparison.failed("The checkpoint holds no such weight. More.", **base)
    assert plain.headline() == "grad:w: the checkpoint holds no such weight"


def test_html_shows_the_distribution_and_budget_lines_the_text_report_shows():
    """The one renderer (report/quantisation.py) serves the HTML page too: a
    ``--kl-budget`` verdict's lines appear in it as in the text report; none without."""
    import html

    from tfparity.checks.crosscheck.distribution import details, failures
    from tfparity.compare.bootstrap import bootstrap_verdict, parse_limits
    from tfparity.compare.distribution import position_metrics
    from tfparity.report.html import render_html
    from tfparity.report.quantisation import distribution_lines

    rng = np.random.default_rng(0)
    ref = rng.normal(size=(6, 5, 20)) * 3
    metrics = position_metrics(ref, ref + rng.normal(size=ref.shape))
    verdict = bootstrap_verdict(metrics, parse_limits("kl_mean=1e-4"), resamples=100)
    rows = failures(verdict)
    report = Report("crosscheck", "m", False, rows, None, details(metrics, verdict))
    lines = distribution_lines(report.details["distribution"])
    assert lines[1].startswith("distribution budget FAIL over 6 sequences")
    page = render_html([report])
    assert all(html.escape(line) in page for line in lines)
    assert rows[0].name == "distribution kl_mean (logits)"
    plain = Report("crosscheck", "m", True, [], None, {})
    assert "distribution budget" not in render_html([plain])
