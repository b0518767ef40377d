"""The text lines of the exact check (``details["requantisation"]``,
tfparity/report/quantisation.py): one line when the file reproduces or the check is
skipped, a row per differing variable otherwise."""

from __future__ import annotations

from tfparity.report.quantisation import requantisation_lines

BASE = {"source": "keras-hub:tiny:llama", "mode": "int8", "layers": {"int8": 15}}


def test_a_file_that_reproduces_says_so_in_one_line():
    r = {**BASE, "skipped": None, "reproduces": True, "compared": 32, "identical": 32}
    assert requantisation_lines(r) == [
        "",
        "requantisation: reproduces Keras's fresh int8 quantisation of keras-hub:tiny:llama: "
        "32 variables identical",
    ]


def test_a_skipped_check_says_why():
    r = {**BASE, "mode": "gptq", "skipped": "gptq quantisation depends on its calibration data"}
    (_, line) = requantisation_lines(r)
    assert line.startswith("requantisation: not checked against Keras's fresh gptq")
    assert line.endswith(": gptq quantisation depends on its calibration data")


def test_each_differing_variable_is_a_row_with_its_effect():
    path = "transformer_layer_1/feedforward_output_dense/kernel_scale"
    difference = {
        "path": path,
        "block": 1,
        "detail": "scaled by 1.5",
        "effect": {"output": "logits", "error": 0.08, "with_fresh": 0.0, "drop": 0.08},
    }
    r = {
        **BASE,
        "skipped": None,
        "reproduces": False,
        "compared": 32,
        "identical": 31,
        "output": "logits",
        "output_error": 0.08,
        "differences": [difference],
    }
    lines = requantisation_lines(r)
    assert lines[1].startswith("requantisation: 1 of 32 variables differ from Keras's fresh int8")
    assert lines[1].endswith("(logits error to the fresh model 0.08):")
    assert lines[3].split() == [
        "1",
        path,
        "scaled",
        "by",
        "1.5;",
        "error",
        "0",
        "with",
        "the",
        "fresh",
        "one",
    ]
    assert requantisation_lines(None) == [] and requantisation_lines({}) == []
