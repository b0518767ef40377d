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
from tfparity.adapters.hf_tf.tf_model import TFModel
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
    from tfparity.adapters.reference.pt_model import PTModel

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


def test_red_on_a_broken_model_with_the_readable_block(pytester, tmp_path, monkeypatch):
    for ci in ("CI", "BUILD_NUMBER"):  # on CI pytest prints the summary lines whole
        monkeypatch.delenv(ci, raising=False)
    monkeypatch.setenv("COLUMNS", "80")  # the summary cut at 80 columns, as on a terminal
    pytester.makepyfile(test_red=RED)
    out = tmp_path / "reports"
    result = pytester.runpytest("--tfparity-json", str(out))
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    # the first divergence leads, so pytest's summary line shows it
    assert re.search(
        r"AssertionError: layer \d output diverges \(hidden_states\[\d\]\): "
        r"FAIL crosscheck, tiny:bert\n",
        text,
    )
    assert "hint: weight encoder.layer" in text and "bias is all zeros in TF" in text
    # one block per failing assertion
    failures, summary = text.split("short test summary info", 1)
    assert failures.count("Mismatched elements:") == 2
    # the embeds check says what hidden_states[0] is
    assert "AssertionError: embeddings diverge (hidden_states[0]): FAIL embeds, " in text
    # the summary lines, cut at 80 columns, lead with the layer and component (the
    # second one's node id left room for "AssertionError: e..." alone)
    lines = [line for line in summary.splitlines() if line.startswith("FAILED")]
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].startswith("FAILED test_red.py::test_broken_port - layer 1 output diverges")
    assert lines[1].startswith(
        "FAILED test_red.py::test_hidden_states_0_fed_as_embeddings - embeddings dive"
    )
    # each message says where its full report went, and it is there
    for test in ("test_broken_port", "test_hidden_states_0_fed_as_embeddings"):
        path = (out / f"test_red.py__{test}.json").resolve()
        assert f"full report: {path} (written when this test ends)" in text
        assert json.loads(path.read_text())["passed"] is False  # failing tests keep reports
    assert len(list(out.iterdir())) == 2


def test_crosscheck_failure_message_is_short_verdict_first_and_once_per_tensor(monkeypatch):
    """The CI user's message: the verdict and the first divergence on line 1, the hint
    on line 2, at most 25 lines, each tensor's block once (last_hidden_state is
    hidden_states[-1]), no reload pass for a named reference, and where the full
    report is."""
    import tfparity.api
    from tfparity import assert_crosscheck
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.assertions import CONTEXT, HelperContext, helper_context
    from tfparity.inputs import InputOptions
    from tfparity.testing import perturb_ffn

    def no_reload(model):
        raise AssertionError("the reload pass ran although the test named its reference")

    monkeypatch.setattr(tfparity.api, "save_and_reload", no_reload)
    broken = TFModel.load("tiny:bert")
    perturb_ffn(broken, layer=1, factor=1.1)
    inputs = InputOptions(random=3, seq_len=8, batch_size=3)
    token = CONTEXT.set(None)  # as outside tfparity's plugin
    try:
        with pytest.raises(AssertionError) as info:
            assert_crosscheck(broken, pt_model="tiny:bert", inputs=inputs)
    finally:
        CONTEXT.reset(token)
    lines = str(info.value).splitlines()
    assert lines[0] == (
        "layer 1 intermediate diverges (hidden_states[2]): FAIL crosscheck, tiny:bert"
    )
    # pytest's summary line at 80 columns (the plugin drops "AssertionError: " from it)
    summary = f"FAILED tests/test_port.py::test_port_matches_pytorch - {lines[0]}"
    assert "layer 1 intermediate" in summary[:80]
    assert lines[1].startswith("hint: weight encoder.layer.1.intermediate.dense.weight")
    assert len(lines) <= 25
    assert [r.check for r in info.value.reports] == ["crosscheck"]  # one pass: no reload
    blocks = [line for line in lines if line.endswith("tensors are not close!")]
    assert blocks == ["hidden_states[2] = last_hidden_state: tensors are not close!"]
    assert sum(line.startswith("last_hidden_state") for line in lines) == 1  # one table row
    assert lines[-1] == (
        "full report: this AssertionError's .reports (render or write_json them), or run "
        "under pytest with --tfparity-json DIR"
    )
    # under the plugin: the option to name, or the file the report goes to
    for json_path, last in [
        (None, "full report: rerun pytest with --tfparity-json DIR (one JSON file per test)"),
        (Path("/r/t.json"), "full report: /r/t.json (written when this test ends)"),
    ]:
        with helper_context(HelperContext(json_path=json_path)), pytest.raises(AssertionError) as e:
            assert_crosscheck(broken, pt_model="tiny:bert", inputs=inputs)
        assert str(e.value).splitlines()[-1] == last


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
    first = str(info.value).splitlines()[0]
    assert first.startswith("embeddings diverge (hidden_states[0]): FAIL embeds")
    assert first.endswith(", tiny:bert")
    assert "hint:" in str(info.value)
