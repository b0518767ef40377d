"""``tfparity runtimes`` on a real flatbuffer converted from tiny BERT (once per session):
the clean file passes on every LiteRT kernel set, against each other and against PyTorch
by the float64 referee; a kernel set whose softmax kernel scales its logits by 1.05 (a
test's set, registered for the test: the production path judges it) fails, named with
the first tensor where it parts and the op there; bad input exits 2."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

import tfparity
from tfparity import cli
from tfparity.adapters.runtime.kernel_sets import KERNEL_SETS
from tfparity.errors import TfparityError
from tfparity.inputs import InputOptions
from tfparity.testing import broken_kernel_set

# the model's own scope is tf_bert_model_<n> where other TF models were built first
SOFTMAX = re.compile(r"tf_bert_model(_\d+)?/bert/encoder/layer_\._0/attention/self/Softmax")


@pytest.fixture(scope="module")
def flatbuffer(tiny_bert_litert):
    return tiny_bert_litert("fp32")  # converted once per session (test_litert.py's too)


@pytest.fixture
def broken(monkeypatch):
    """The LiteRT sets with the test's broken one added (named ``broken``)."""
    litert = KERNEL_SETS["litert"]
    monkeypatch.setitem(
        KERNEL_SETS, "litert", replace(litert, sets=(*litert.sets, broken_kernel_set()))
    )


def test_a_clean_flatbuffer_passes_on_every_kernel_set_and_thread_count(flatbuffer, tmp_path):
    out = tmp_path / "r.json"
    code = cli.main(["runtimes", str(flatbuffer), "--threads", "1,2", "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["check"] == "runtimes" and data["passed"] and data["details"]["parting"] == []
    runs = data["details"]["runs"]
    labels = ["reference@1", "xnnpack@1", "xnnpack@2", "optimised@1", "optimised@2"]
    assert [r["run"] for r in runs] == labels  # the reference kernels have no threads
    assert all(r["passed"] and r["parting"] is None and r["tensors"] > 50 for r in runs)
    # each other run's outputs against the consensus's first run, by the scaled rule
    names = {c["name"] for c in data["comparisons"]}
    assert {f"{run}:last_hidden_state" for run in labels[1:]} <= names


def test_a_broken_kernel_set_parts_named_with_its_first_tensor_and_op(flatbuffer, broken):
    report = tfparity.check_runtimes(flatbuffer, threads=1)
    assert not report.passed and report.details["parting"] == ["broken@1"]
    row = next(r for r in report.details["runs"] if r["run"] == "broken@1")
    parting = row["parting"]
    assert SOFTMAX.fullmatch(parting["tensor"])
    assert not any("--source MODEL" in n for n in report.notes)  # a float file's parting
    assert (parting["op"], parting["against"]) == ("SOFTMAX", "reference@1")
    assert parting["max_abs_diff"] > parting["atol"] and parting["position"] > 1
    assert all(r["passed"] for r in report.details["runs"] if r["run"] != "broken@1")
    text = tfparity.render(report)
    assert f"FAIL runtimes: broken@1 parts at '{parting['tensor']}' (op SOFTMAX)" in text
    failed = {c.name for c in report.failures}
    assert f"broken@1:{parting['tensor']}" in failed and "broken@1:last_hidden_state" in failed
    # two runs alone cannot tell which is wrong: both are named, and the report says so
    two = tfparity.check_runtimes(flatbuffer, sets="reference,broken")
    assert two.details["parting"] == ["reference@1", "broken@1"]
    assert any("which side is wrong cannot be told" in n for n in two.notes)


def test_a_full_int8_file_parts_without_a_source_saying_why_and_passes_with_one(
    tiny_bert_litert,
):
    """Kernel sets quantise activations their own way: a clean full-int8 file parts by
    more than the fp32 rule without a defect. The report says so and names --source,
    with which each run is judged by the quantised budgets against PyTorch."""
    full = tiny_bert_litert("full")
    apart = tfparity.check_runtimes(full, threads=1)
    assert not apart.passed
    (note,) = [n for n in apart.notes if "--source MODEL" in n]
    assert note.startswith("The file is full int8: kernel sets may compute its integer ops")
    judged = tfparity.check_runtimes(full, source="tiny:bert", threads=1)
    assert judged.passed and judged.details["reference"]
    assert not any("--source MODEL" in n for n in judged.notes)


def test_against_the_source_clean_sets_pass_and_the_broken_one_is_localised(flatbuffer, broken):
    report = tfparity.check_runtimes(
        flatbuffer,
        source="tiny:bert",
        sets=["reference", "xnnpack", "broken"],
        threads=[1],
        inputs=InputOptions(random=3, seq_len=12),
    )
    assert report.details["judge"].startswith("the float64 referee")
    verdicts = {r["run"]: r["passed"] for r in report.details["runs"]}
    assert verdicts == {"reference@1": True, "xnnpack@1": True, "broken@1": False}
    assert {c.judge for c in report.comparisons if c.name.startswith("xnnpack@1:")} == {"referee"}
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (1, 0, "attention")
    parting = next(r["parting"] for r in report.details["runs"] if r["run"] == "broken@1")
    assert SOFTMAX.fullmatch(parting["tensor"]) and parting["op"] == "SOFTMAX"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--sets", "reference,bogus"], "unknown 'bogus'"),
        (["--threads", "0"], "--threads takes thread counts >= 1"),
        (["--text", "hello"], "Texts need a tokenizer"),
        (["--pt", "tiny:bert"], "`tfparity runtimes` does not take --pt"),
    ],
)
def test_bad_arguments_exit_2_naming_what_is_wrong(flatbuffer, argv, message, capsys):
    assert cli.main(["runtimes", str(flatbuffer), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_file_that_is_no_artefact_with_kernel_sets_exits_2(tmp_path, capsys):
    fake = tmp_path / "not.tflite"
    fake.write_bytes(b"not a flatbuffer at all")
    assert cli.main(["runtimes", str(fake)]) == 2
    assert "is not a LiteRT flatbuffer" in capsys.readouterr().err
    model = tmp_path / "m.keras"
    model.write_bytes(b"zip")
    with pytest.raises(TfparityError, match="takes an artefact with kernel sets"):
        tfparity.check_runtimes(model)
