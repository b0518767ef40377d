"""The pytest plugin, run the way a user's project runs it: a fresh test file in a
temporary directory, with the plugin loaded from the installed entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CI_DOC = Path(__file__).resolve().parents[1] / "docs" / "ci-and-pytest.md"

GREEN = """
from tfparity import assert_crosscheck, assert_embeds_parity
from tfparity.assertions import CONTEXT


def test_embeds(tfparity_model):
    model = tfparity_model("tiny:bert")
    assert model is tfparity_model("tiny:bert")  # cached for the session
    report = assert_embeds_parity(model)
    assert report.passed and report.check == "embeds"


def test_crosscheck_on_a_seeded_batch(tfparity_batch):
    batch = tfparity_batch("tiny:bert", n=3, seq_len=10, seed=1)
    again = tfparity_batch("tiny:bert", n=3, seq_len=10, seed=1)
    other = tfparity_batch("tiny:bert", n=3, seq_len=10, seed=2)
    assert batch.input_ids.shape[0] == 3 and batch.input_ids.shape[1] <= 10
    assert (batch.input_ids == again.input_ids).all()
    assert (batch.input_ids != other.input_ids).any()
    (report,) = assert_crosscheck("tiny:bert", batches=[batch], reload=False)
    assert report.passed and report.details["batches"] == 1


def test_device_option_reaches_the_helpers():
    assert CONTEXT.get().device == "cpu"


def test_without_assertions():
    pass
"""

RED = """
from tfparity import assert_crosscheck, assert_embeds_parity
from tfparity.adapters.tf_model import TFModel
from tfparity.testing import by_name


def test_broken_port():
    broken = by_name("dropped output bias").apply(TFModel.load("tiny:bert"))
    assert_crosscheck(broken, "tiny:bert", reload=False)


def test_hidden_states_0_fed_as_embeddings(tfparity_model):
    model = tfparity_model("tiny:bert")
    assert_embeds_parity(model, embeds_fn=lambda b: model.run(b)["hidden_states[0]"])
"""


@pytest.fixture(scope="module", autouse=True)
def frameworks_imported(load_tf_model):
    """Import TF, torch and the BERT modules here, before any in-process run: pytester
    restores ``sys.modules`` after each run, and a C extension imported a second time
    in one process aborts it."""
    from tfparity.adapters.pt_model import PTModel

    PTModel.from_tf(load_tf_model("tiny:bert").model)


def test_green_on_tiny_bert_with_fixtures_device_and_json(pytester, tmp_path):
    pytester.makepyfile(test_green=GREEN)
    out = tmp_path / "reports"
    result = pytester.runpytest("--tfparity-device", "cpu", "--tfparity-json", str(out))
    result.assert_outcomes(passed=4)
    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "test_green.py__test_crosscheck_on_a_seeded_batch.json",
        "test_green.py__test_embeds.json",
    ]
    embeds = json.loads((out / "test_green.py__test_embeds.json").read_text())
    assert embeds["check"] == "embeds" and embeds["passed"] is True
    assert embeds["model"] == "tiny:bert"
    assert embeds["details"]["device"] == "cpu:0"  # --tfparity-device placed the run
    cross = json.loads((out / "test_green.py__test_crosscheck_on_a_seeded_batch.json").read_text())
    assert cross["check"] == "crosscheck" and cross["passed"] is True
    assert [row["hidden_state"] for row in cross["details"]["layers"]] == [0, 1, 2]


def test_red_on_a_broken_model_with_the_readable_block(pytester, tmp_path):
    pytester.makepyfile(test_red=RED)
    out = tmp_path / "reports"
    result = pytester.runpytest("--tfparity-json", str(out))
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "AssertionError" in text
    assert text.count("Mismatched elements:") >= 2
    # the cross-check localises the dropped bias and names it
    assert re.search(r"first divergence: hidden_states\[\d\] · layer \d · component output", text)
    assert "hint: weight encoder.layer" in text and "bias is all zeros in TF" in text
    # the embeds check says what hidden_states[0] is
    assert "first divergence: hidden_states[0] · layer embeddings" in text
    assert "FAIL crosscheck" in text and "FAIL embeds" in text
    reports = {p.name: json.loads(p.read_text()) for p in out.iterdir()}
    assert len(reports) == 2  # failing tests keep their reports too
    assert all(r["passed"] is False for r in reports.values())


def readme_test_file() -> str:
    """The ten-line CI test file the docs tell users to copy."""
    section = CI_DOC.read_text().split("## The plugin", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_docs_ci_file_is_ten_lines_and_green_on_minilm(pytester, minilm):
    source = readme_test_file()
    assert len(source.splitlines()) == 10
    assert 'assert_crosscheck("minilm", reload=False)' in source
    pytester.makepyfile(test_parity=source)
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)


def test_json_name_is_a_safe_file_name():
    from tfparity.pytest_plugin import json_name

    assert json_name("tests/test_x.py::test_y") == "tests_test_x.py__test_y"
    assert json_name("tests/test_x.py::test_y[a/b c]").startswith("tests_test_x.py__test_y_a_b_c_-")
    assert "/" not in json_name("../../etc::x") and not json_name("..").startswith(".")


def test_helpers_outside_pytest_plugin_context_raise_readable_assertion(load_tf_model):
    from tfparity import assert_embeds_parity

    model = load_tf_model("tiny:bert")
    with pytest.raises(AssertionError, match="Mismatched elements") as info:
        assert_embeds_parity(model, embeds_fn=lambda b: model.run(b)["hidden_states[0]"])
    assert "first divergence: hidden_states[0]" in str(info.value)
    assert "hint:" in str(info.value)
