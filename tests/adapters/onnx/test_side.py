"""The ONNX side on real files exported from tiny BERT with torch's legacy exporter: a
clean export (dynamic axes, every hidden state an output, weights in a ``.onnx.data``
file) passes against PyTorch with every hidden state compared; an export with one
weight scaled by 1.05 (static ``[2, 16]`` inputs, no hidden-state outputs, so they come
from the marked intermediates) fails localised to that layer and sub-layer with the
hint naming the weight. Broken files exit 2 naming what is wrong. Files are exported
once per module (about a second)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from tfparity import cli  # noqa: E402
from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir  # noqa: E402
from tfparity.adapters.onnx.torch_export import export_torch  # noqa: E402

INPUTS = ["--random", "5", "--seq-len", "12", "--batch-size", "3"]
SCALED = "encoder.layer.1.intermediate.dense.weight"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import transformers

    root = tmp_path_factory.mktemp("onnx")
    ckpt = checkpoint_dir("bert")
    model = transformers.BertModel.from_pretrained(str(ckpt), attn_implementation="eager").eval()
    # the clean file keeps its weights in external data; a copy without its data file
    clean = export_torch(model, root / "clean.onnx", external_data=True)
    (root / "lost").mkdir()
    shutil.copy(clean, root / "lost" / "clean.onnx")
    with torch.no_grad():
        model.get_parameter(SCALED).mul_(1.05)
    export_torch(model, root / "scaled.onnx", hidden_states=False, dynamic=False)
    with torch.no_grad():
        model.get_parameter(SCALED).div_(1.05)
    export_torch(model, root / "ids.onnx", hidden_states=False, inputs=("input_ids",))
    return {"ckpt": str(ckpt), "root": root}


def _crosscheck(capsys, tmp_path, path, ckpt, *extra):
    report = tmp_path / "report.json"
    code = cli.main(["crosscheck", str(path), "--pt", ckpt, *INPUTS, "--json", str(report), *extra])
    out = capsys.readouterr().out
    return code, out, json.loads(report.read_text())


def test_clean_export_with_external_data_passes_every_hidden_state(files, capsys, tmp_path):
    path = files["root"] / "clean.onnx"
    code, out, report = _crosscheck(capsys, tmp_path, path, files["ckpt"], "--localise", "always")
    assert code == 0, out
    names = {c["name"] for c in report["comparisons"]}
    assert {"hidden_states[0]", "hidden_states[1]", "hidden_states[2]", "pooler_output"} <= names
    assert all(c["passed"] for c in report["comparisons"])
    assert report["details"]["compares"].startswith("ONNX Runtime 1.32.0 (CPUExecutionProvider)")
    # the sub-layers came from the marked copy, every one within the referee's bound
    components = {c["name"]: c["accumulated_ok"] for c in report["details"]["components"]}
    assert {"layer_0.attention", "layer_1.intermediate", "layer_1.output"} <= set(components)
    assert all(components.values())
    assert "dynamic input shape [?x?]" in out
    assert "optimised session (ORT_ENABLE_ALL" in out and "graph optimisation off" in out


def test_a_weight_scaled_by_1_05_fails_localised_with_the_weight_named(files, capsys, tmp_path):
    path = files["root"] / "scaled.onnx"
    code, out, report = _crosscheck(capsys, tmp_path, path, files["ckpt"])
    assert code == 1, out
    d = report["first_divergence"]
    assert (d["hidden_state"], d["layer"], d["component"]) == (2, 1, "intermediate")
    assert SCALED in d["hint"] and "scaled by 1.05" in d["hint"], d["hint"]
    passed = {c["name"]: c["passed"] for c in report["comparisons"]}
    # hidden states are no outputs of this file: read from its intermediates
    assert passed["hidden_states[1]"] and not passed["hidden_states[2]"]
    assert "static input shape [2x16]" in out  # 5 rows of <= 12 tokens padded, cut back


def test_a_graph_without_a_mask_runs_unpadded_and_refuses_padding(files, capsys):
    from tfparity.adapters.exported import load_export
    from tfparity.adapters.sources.specs import parse_spec
    from tfparity.errors import TfparityError
    from tfparity.inputs import Batch

    path = files["root"] / "ids.onnx"
    assert cli.main(["crosscheck", str(path), "--pt", "tiny:bert"]) == 0  # the default texts
    out = capsys.readouterr().out
    assert "The ONNX graph takes no attention mask" in out and "ran unpadded" in out
    side = load_export(parse_spec(str(path)), "tiny:bert")
    padded = Batch(np.array([[5, 6, 7], [8, 9, 0]]), np.array([[1, 1, 1], [1, 1, 0]]))
    with pytest.raises(TfparityError, match="takes no attention mask, and this batch holds"):
        side.run(padded)


def _refused(capsys, path) -> str:
    assert cli.main(["crosscheck", str(path), "--pt", "tiny:bert", "--random", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_a_text_file_named_onnx_exits_2(tmp_path, capsys):
    path = tmp_path / "x.onnx"
    path.write_text("not a model\n")
    assert "x.onnx is not an ONNX model" in _refused(capsys, path)


def test_a_missing_external_data_file_exits_2_naming_it(files, capsys):
    err = _refused(capsys, files["root"] / "lost" / "clean.onnx")
    assert "clean.onnx.data is missing" in err


def test_an_erfc_node_exits_2_naming_the_converter_and_the_fix(tmp_path, capsys):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node("Erfc", ["input_ids"], ["y"], name="bert/intermediate/Erfc")
    graph = helper.make_graph([node], "gelu", [x], [y])
    path = tmp_path / "erfc.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    err = _refused(capsys, path)
    assert "node 'bert/intermediate/Erfc' is an Erfc op" in err
    assert "no handler for TensorFlow's exact GELU" in err and "docs/onnx.md" in err


def test_without_onnxruntime_the_extra_is_named(monkeypatch, tmp_path, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "onnxruntime" else real(n, *a)
    )
    path = tmp_path / "m.onnx"
    path.write_bytes(b"\x08\x07")
    assert "pip install 'tfparity[onnx]'" in _refused(capsys, path)


class _Recorded:
    """An InferenceSession that records the providers it was given and runs on the CPU
    (there is no GPU here), saying it runs on the first it was given."""

    calls: list = []
    real: object = None  # onnxruntime's own InferenceSession

    def __init__(self, model, options, providers):
        _Recorded.calls.append(providers)
        self._given = providers
        self._session = _Recorded.real(model, options, providers=["CPUExecutionProvider"])

    def get_providers(self):
        return [p if isinstance(p, str) else p[0] for p in self._given]

    def __getattr__(self, name):
        return getattr(self._session, name)


@pytest.mark.parametrize("cuda", [True, False])
def test_cuda_is_chosen_where_present_and_device_picks_the_provider(files, monkeypatch, cuda):
    """Where ONNX Runtime has CUDA's provider it goes first, the CPU's after it, and the
    header names it; ``--device cpu`` gives the CPU's alone, ``gpu:1`` CUDA's on GPU 1.
    Without CUDA the CPU's alone, and a GPU asked for is exit 2."""
    import onnxruntime

    from tfparity.adapters.exported import load_export
    from tfparity.adapters.runtime.execution_options import ExecutionOptions
    from tfparity.adapters.sources.specs import parse_spec
    from tfparity.errors import TfparityError

    monkeypatch.setattr(_Recorded, "real", onnxruntime.InferenceSession)
    monkeypatch.setattr(_Recorded, "calls", [])
    cpu, gpu = "CPUExecutionProvider", "CUDAExecutionProvider"
    monkeypatch.setattr(onnxruntime, "InferenceSession", _Recorded)
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [gpu, cpu][not cuda :])
    side = load_export(parse_spec(str(files["root"] / "clean.onnx")), files["ckpt"])
    assert _Recorded.calls == [[gpu, cpu] if cuda else [cpu]]
    assert f"({gpu if cuda else cpu})" in side.framework
    on_cpu = side.executed(ExecutionOptions(device="/job:localhost/device:CPU:0"))
    assert _Recorded.calls[-1] == [cpu] and f"({cpu})" in on_cpu.framework
    assert on_cpu.notes[-1].startswith(
        f"ONNX: run by ONNX Runtime {onnxruntime.__version__} ({cpu})"
    )
    if cuda:
        on_gpu = side.executed(ExecutionOptions(device="/device:GPU:1"))
        assert _Recorded.calls[-1] == [(gpu, {"device_id": 1}), cpu]
        assert f"({gpu})" in on_gpu.framework
    else:
        with pytest.raises(TfparityError, match="has no CUDAExecutionProvider.*onnxruntime-gpu"):
            side.executed(ExecutionOptions(device="/device:GPU:0"))


def test_assert_crosscheck_on_an_onnx_path_both_ways(files):
    """The pytest assertion takes a ``.onnx`` path with a PyTorch reference spec: the
    clean file passes (on ``--tfparity-device cpu``, the plugin's context, its CPU
    provider); the file with a weight x1.05 raises AssertionError naming the layer,
    sub-layer and weight."""
    from tfparity import assert_crosscheck
    from tfparity.assertions import HelperContext, helper_context
    from tfparity.inputs import InputOptions

    inputs = InputOptions(random=5, seq_len=12, batch_size=3)
    with helper_context(HelperContext(device="cpu")) as context:
        (report,) = assert_crosscheck(
            str(files["root"] / "clean.onnx"), files["ckpt"], inputs=inputs
        )
    assert report.passed and context.reports == [report]
    assert (
        report.details["compares"].startswith("ONNX Runtime")
        and "(CPUExecutionProvider)" in (report.details["compares"])
    )
    assert report.details["device"] == "cpu:0"
    with pytest.raises(AssertionError) as raised:
        assert_crosscheck(str(files["root"] / "scaled.onnx"), files["ckpt"], inputs=inputs)
    message = str(raised.value)
    assert message.startswith("layer 1 intermediate diverges (hidden_states[2]): FAIL crosscheck")
    assert f"{SCALED} is PyTorch's scaled by 1.05" in message
    assert not raised.value.reports[0].passed
