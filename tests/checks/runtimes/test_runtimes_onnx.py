"""``tfparity runtimes`` on a real ONNX file exported from tiny BERT (torch's legacy
exporter, weights in a ``.onnx.data`` file, once per module, about a second): the clean
file passes on every graph optimisation level at 1 and 2 threads, against each other and
against PyTorch by the float64 referee; a kernel set whose first Softmax runs on its
logits x 1.05 (a test's set, registered for the test: the production path judges it)
fails, named with the first tensor where it parts and the op there; a set sharing no
intermediate tensor is said to be compared at the outputs only; bad input exits 2."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("torch")

import tfparity  # noqa: E402
from tfparity import cli  # noqa: E402
from tfparity.adapters.onnx.kernels import Kernels  # noqa: E402
from tfparity.adapters.runtime.kernel_sets import KERNEL_SETS, KernelSet  # noqa: E402
from tfparity.inputs import InputOptions  # noqa: E402
from tfparity.testing import broken_onnx_kernel_set  # noqa: E402

SOFTMAX = "/m/encoder/layer.0/attention/self/Softmax_output_0"
LABELS = ["none@1", "none@2", "basic@1", "basic@2", "all@1", "all@2"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import transformers

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.onnx.torch_export import export_torch

    ckpt = checkpoint_dir("bert")
    model = transformers.BertModel.from_pretrained(str(ckpt), attn_implementation="eager").eval()
    # weights in a data file beside it: the optimised graphs read them from there
    root = tmp_path_factory.mktemp("onnx-rt")
    return export_torch(model, root / "bert.onnx", external_data=True)


def _with(monkeypatch, *sets: KernelSet) -> None:
    onnx = KERNEL_SETS["onnx"]
    monkeypatch.setitem(KERNEL_SETS, "onnx", replace(onnx, sets=(*onnx.sets, *sets)))


@dataclass(frozen=True)
class Renamed(Kernels):
    """The graph unoptimised with every intermediate tensor renamed: the same
    computation, sharing no tensor but the outputs with the file (a test's set)."""

    def model(self, model: Any) -> Any:
        import onnx

        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        keep = {o.name for o in copy.graph.output}
        for node in copy.graph.node:
            node.input[:] = [
                n if n in keep or not n.startswith("/") else n + "'" for n in node.input
            ]
            node.output[:] = [
                n if n in keep or not n.startswith("/") else n + "'" for n in node.output
            ]
        return copy


def test_a_clean_file_passes_on_every_optimisation_level_and_thread_count(exported, tmp_path):
    out = tmp_path / "r.json"
    assert cli.main(["runtimes", str(exported), "--threads", "1,2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["passed"] and data["details"]["parting"] == []
    assert data["details"]["runtime"].startswith("ONNX Runtime")
    runs = {r["run"]: r for r in data["details"]["runs"]}
    assert list(runs) == LABELS
    assert all(r["passed"] and r["parting"] is None for r in runs.values())
    # fusions hide the tensors inside them: the optimised graph exposes fewer, each one
    # also in the unoptimised graph (a fused node keeps its last tensor's name)
    assert runs["all@1"]["tensors"] < runs["none@1"]["tensors"]
    assert all(r["compared"] == r["tensors"] > 50 for r in runs.values())
    names = {c["name"] for c in data["comparisons"]}
    assert {f"{run}:last_hidden_state" for run in LABELS[1:]} <= names
    assert not any("outputs only" in n for n in data["notes"])


def test_a_broken_kernel_set_parts_named_with_its_first_tensor_and_op(
    exported, monkeypatch, capsys
):
    _with(monkeypatch, broken_onnx_kernel_set())
    assert cli.main(["runtimes", str(exported), "--threads", "1", "--sets", "none,all,broken"]) == 1
    out = capsys.readouterr().out
    assert f"FAIL runtimes: broken@1 parts at '{SOFTMAX}' (op Softmax)" in out
    report = tfparity.check_runtimes(exported, threads=1)
    assert not report.passed and report.details["parting"] == ["broken@1"]
    parting = next(r["parting"] for r in report.details["runs"] if r["run"] == "broken@1")
    assert (parting["tensor"], parting["op"], parting["against"]) == (SOFTMAX, "Softmax", "none@1")
    assert parting["max_abs_diff"] > parting["atol"] and parting["position"] > 1
    failed = {c.name for c in report.failures}
    assert f"broken@1:{SOFTMAX}" in failed and "broken@1:last_hidden_state" in failed


def test_against_the_source_clean_sets_pass_and_the_broken_one_is_localised(exported, monkeypatch):
    _with(monkeypatch, broken_onnx_kernel_set())
    report = tfparity.check_runtimes(
        exported,
        source="tiny:bert",
        sets=["none", "all", "broken"],
        threads=[1],
        inputs=InputOptions(random=3, seq_len=12),
    )
    assert report.details["judge"].startswith("the float64 referee")
    verdicts = {r["run"]: r["passed"] for r in report.details["runs"]}
    assert verdicts == {"none@1": True, "all@1": True, "broken@1": False}
    assert {c.judge for c in report.comparisons if c.name.startswith("all@1:")} == {"referee"}
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (1, 0, "attention")
    parting = next(r["parting"] for r in report.details["runs"] if r["run"] == "broken@1")
    assert (parting["tensor"], parting["op"]) == (SOFTMAX, "Softmax")


def test_a_set_sharing_no_intermediate_is_compared_at_the_outputs_only(exported, monkeypatch):
    _with(monkeypatch, KernelSet("renamed", "a test's", False, Renamed("ORT_DISABLE_ALL")))
    report = tfparity.check_runtimes(exported, sets="none,all,renamed", threads=1)
    assert report.passed  # the same computation: its outputs agree
    runs = {r["run"]: r for r in report.details["runs"]}
    assert runs["renamed@1"]["compared"] == 5 < runs["renamed@1"]["tensors"]  # 5 outputs
    said = [n for n in report.notes if n.startswith("Compared at the graph outputs only")]
    assert len(said) == 1 and "renamed@1 (" in said[0] and "all@1" not in said[0]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--sets", "all,xnnpack"], "unknown 'xnnpack'; an ONNX (.onnx) file runs on none"),
        (["--signature", "serving_default"], "is an ONNX file, which has none to choose"),
    ],
)
def test_bad_arguments_exit_2_naming_what_is_wrong(exported, argv, message, capsys):
    assert cli.main(["runtimes", str(exported), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_file_that_is_not_onnx_exits_2(tmp_path, capsys):
    fake = tmp_path / "x.onnx"
    fake.write_text("not a model\n")
    assert cli.main(["runtimes", str(fake)]) == 2
    err = capsys.readouterr().err
    assert "x.onnx is not an ONNX model" in err and "Traceback" not in err
