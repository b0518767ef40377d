"""``tfparity backends`` on a keras-hub spec and on a callable ``module:function``.

Each run prepares the model (the conversion or the build, saved to one .keras, by the
TensorFlow backend's process) and runs it on every backend's process, taken from the
session's warm ones, so each model runs once per module and its report is shared: the
clean keras-hub BERT on TensorFlow and torch, against the Keras float64 referee and HF
PyTorch at float64; a port whose checkpoint has one weight changed (against the
original as --pt) on TensorFlow alone; the example callable with its JAX-only fault on
TensorFlow and JAX (TensorFlow's rows show the callable's clean path). All three
backends on every keras-hub family: docs/backends.md's table (scripts/backends_table.py).

The rotary families: the docs' own ``keras-hub:tiny:qwen2``, whose float64 referee
computes keras-hub's fixed float32 casts at float64; keras-hub models saved to
``.keras`` (a Llama backbone, a Qwen2 CausalLM), which take tokenised inputs as a spec
does; and the Llama file whose layer 1 rotary embedding is 0.1% off on torch only. The
files' runs share one set of processes (their --import is the same).
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from tfparity.cli import main
from tfparity.cross_backend.prepare import model_kind

EXAMPLE = "tfparity.examples.keras_backends_model"
HUB_EXAMPLE = "tfparity.examples.keras_hub_backends"
ALL = ["tensorflow", "jax", "torch"]
HIDDEN = [
    "hidden_states[0] (embeddings_dropout)",
    "hidden_states[1] (transformer_layer_0)",
    "hidden_states[2] (transformer_layer_1)",
    "pooler_output (pooled_dense)",
]


@pytest.fixture(scope="module")
def hub_bert(tfparity_backend_workers):
    import tfparity

    workers = tfparity_backend_workers
    return tfparity.backends(
        "keras-hub:tiny:bert", backends=["tensorflow", "torch"], workers=workers, gradients=True
    )


@pytest.fixture(scope="module")
def hub_gradient_fault(backends_run):
    """tiny:bert with transformer_layer_1's gradient 0.1% too large on torch only."""
    fault = "tfparity.examples.keras_hub_gradient_fault"
    return backends_run(
        "keras-hub:tiny:bert", backends=["tensorflow", "torch"], imports=[fault], gradients=True
    )


@pytest.fixture(scope="module")
def changed_port(tmp_path_factory, backends_run):
    """keras-hub converts a copy of tiny:bert's checkpoint with one row of layer 1's
    output projection changed; the referee is the original (--pt tiny:bert)."""
    from safetensors.numpy import load_file, save_file

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir

    root = tmp_path_factory.mktemp("changed")
    port = root / "bert"
    shutil.copytree(checkpoint_dir("bert"), port)
    weights = load_file(str(port / "model.safetensors"))
    weights["bert.encoder.layer.1.output.dense.weight"][0] += 0.05
    save_file(weights, str(port / "model.safetensors"), metadata={"format": "pt"})
    return backends_run(f"keras-hub:{port}", pt="tiny:bert", backends=["tensorflow"])


@pytest.fixture(scope="module")
def callable_runs(backends_run):
    faulty = backends_run(f"{EXAMPLE}:build_jax_fault", backends=["tensorflow", "jax"])
    return {"faulty": faulty}


def test_model_kinds_are_told_apart_by_their_text():
    assert model_kind("keras-hub:tiny:bert") == "keras-hub"
    assert model_kind(f"{EXAMPLE}:build_clean") == "callable"
    assert model_kind("tiny:bert") == "file"  # a spec backends refuses as not a .keras
    assert model_kind("model.keras") == "file"


def test_a_keras_hub_port_passes_on_every_backend_and_against_hugging_face(hub_bert):
    d = hub_bert.details
    assert hub_bert.passed and d["first_divergence"] is None
    assert d["backends"] == ["tensorflow", "torch"]
    layers = [row["layer"] for row in d["layers"]]
    assert layers[:2] == ["token_embedding", "position_embedding"]
    assert {"transformer_layer_0", "transformer_layer_1", "pooled_dense"} <= set(layers)
    hf = d["hf_referee"]
    assert hf["referee"]["label"].startswith("Hugging Face") and hf["first_divergence"] is None
    assert [row["layer"] for row in hf["layers"]] == HIDDEN
    assert all(c.passed for c in hub_bert.comparisons)
    # float32 rounding against Keras float64; the port's own small difference to HF
    worst = max(c["relative_rmse"] for r in d["layers"] for c in r["backends"].values())
    assert worst < 1e-5
    worst_hf = max(c["relative_rmse"] for r in hf["layers"] for c in r["backends"].values())
    assert worst_hf < 1e-4


def test_a_keras_hub_spec_takes_gradients_its_zero_key_biases_judged_in_their_layers_scale(
    hub_bert,
):
    g = hub_bert.details["gradients"]
    assert hub_bert.passed and g["first_divergence"] is None
    zeros = [row["gradient"] for row in g["rows"] if "zero" in row]
    assert zeros == [
        f"transformer_layer_{k}/self_attention_layer/key/bias" for k in (1, 0)
    ]  # softmax is invariant to the key bias: its gradient is 0 in exact arithmetic


def test_a_keras_hub_gradient_off_on_one_backend_fails_naming_it_and_the_layer(
    hub_gradient_fault,
):
    code, text, data = hub_gradient_fault
    f = data["details"]["gradients"]["first_divergence"]
    assert code == 1 and data["details"]["first_divergence"] is None  # forward agrees
    assert (f["backend"], f["kind"], f["layer"]) == ("torch", "one", "transformer_layer_1")
    rows = {row["gradient"]: row["backends"] for row in data["details"]["gradients"]["rows"]}
    assert rows["pooled_dense/kernel"]["torch"]["passed"]  # above the fault: agrees
    assert not rows["transformer_layer_0:output"]["torch"]["passed"]


def test_a_port_that_differs_from_its_checkpoint_fails_against_hugging_face(changed_port):
    code, text, data = changed_port
    assert code == 1
    f = data["details"]["first_divergence"]
    assert (f["kind"], f["layer"]) == ("all", "hidden_states[2] (transformer_layer_1)")
    assert "the port parts from Hugging Face" in text and "on every backend" in text
    # the Keras float64 referee agrees with the port: the fault is the conversion's
    assert data["details"]["layers"] and all(
        c["passed"] for r in data["details"]["layers"] for c in r["backends"].values()
    )
    verdicts = {r["layer"]: r["backends"]["tensorflow"]["passed"] for r in f_rows(data)}
    assert verdicts["hidden_states[1] (transformer_layer_0)"]  # localised, not earlier


def f_rows(data):
    return data["details"]["hf_referee"]["layers"]


def test_a_callable_with_a_layer_wrong_on_jax_fails_naming_jax_and_the_layer(callable_runs):
    code, text, data = callable_runs["faulty"]
    assert code == 1
    assert "first divergence: backend jax, layer residual (one)" in text
    f = data["details"]["first_divergence"]
    assert (f["backend"], f["layer"], f["kind"]) == ("jax", "residual", "one")
    # the callable's own path is sound: TensorFlow agrees with the referee at every layer
    rows = data["details"]["layers"]
    assert [r["layer"] for r in rows][-1] == "dense_2" and "hf_referee" not in data["details"]
    assert all(r["backends"]["tensorflow"]["passed"] for r in rows)


@pytest.mark.parametrize(
    ("model", "says"),
    [
        (
            "tfparity.examples.no_such_module:build",
            "no module named tfparity.examples.no_such_module",
        ),
        (f"{EXAMPLE}:not_a_model", "returned a str, not a Keras 3 model"),
    ],
)
def test_a_callable_that_is_missing_or_no_model_exits_2_naming_it(model, says, capsys):
    assert main(["backends", model, "--backends", "tensorflow"]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_pt_and_texts_are_refused_for_a_callable(capsys):
    assert main(["backends", f"{EXAMPLE}:build_clean", "--pt", "tiny:bert"]) == 2
    assert "does not take --pt for a .keras file or a callable" in capsys.readouterr().err
    assert main(["backends", "keras-hub:tiny:bert", "--inputs", "x.npz"]) == 2
    assert "--inputs is for a .keras file or a callable" in capsys.readouterr().err


def test_hidden_states_are_judged_on_real_positions_only():
    from tfparity.cross_backend.hf import _masked

    mask = np.array([[1, 1, 0]])
    masked = _masked(np.ones((1, 3, 2)), mask)
    assert masked[0, :, 0].tolist() == [1, 1, 0]
    assert _masked(np.ones((1, 2)), mask).tolist() == [[1, 1]]  # a pooled output: kept


def test_a_hidden_state_no_layer_outputs_is_noted_not_passed():
    """Gemma's hidden_states[0] is an op's output (the scaled embedding): no backend
    recorded it, so it is named in a note rather than judged on nothing."""
    from tfparity.compare.judge import Referee
    from tfparity.cross_backend.hf import HFReferee, check_against_hf
    from tfparity.cross_backend.judge import BackendOutputs

    truth = np.arange(12.0).reshape(1, 3, 4)
    runs = {b: {"block_0": truth.astype(np.float32)} for b in ("tensorflow", "jax")}
    outputs = BackendOutputs("made-up", runs, {"block_0": truth}, "tensorflow")
    hf = HFReferee(
        "HF",
        {"hidden_states[0]": truth, "hidden_states[1]": truth},
        {"hidden_states[0]": "multiply", "hidden_states[1]": "block_0"},
    )
    report = check_against_hf(outputs, hf, Referee(), 1e-4)
    assert report.passed
    assert [row["layer"] for row in report.details["layers"]] == ["hidden_states[1] (block_0)"]
    assert "not compared with HF: hidden_states[0] (multiply)" in report.notes[0]


@pytest.mark.parametrize(("jobs", "first"), [(None, ALL), (2, ALL[:2]), (1, ALL[:1])])
def test_the_first_backend_processes_start_before_the_model_is_prepared(monkeypatch, jobs, first):
    """Their imports overlap with the conversion: when preparing begins, processes for
    the first backends (every one by default, else as many as --jobs lets run) are
    already started, each importing keras_hub, serving the preparing module (the
    TensorFlow one prepares the model)."""
    import tfparity
    from tfparity.adapters.keras_backends import workers as workers_module
    from tfparity.cross_backend import prepare as prepare_module
    from tfparity.errors import TfparityError

    started = []

    class Started:  # stands for a process: records its key, never runs
        def __init__(self, key):
            started.append(key)

        def close(self):
            pass

    seen = {}

    def prepare(*args, **kwargs):
        seen["at prepare"] = list(started)
        raise TfparityError("stopped here")

    monkeypatch.setattr(workers_module, "ServingWorker", Started)
    monkeypatch.setattr(prepare_module, "prepare", prepare)
    with pytest.raises(TfparityError, match="stopped here"):
        tfparity.backends("keras-hub:tiny:bert", backends=ALL, jobs=jobs)
    keys = seen["at prepare"]
    assert [k.backend for k in keys] == first
    assert all(k.imports == ("keras_hub",) and k.entry == prepare_module.ENTRY for k in keys)


@pytest.fixture(scope="module")
def rotary_runs(tmp_path_factory, backends_run):
    from tfparity.examples.keras_hub_backends import save

    root = tmp_path_factory.mktemp("rotary")

    def run(name, backends, **kw):
        path = save(root / f"{name}.keras", **kw)
        return backends_run(str(path), imports=[HUB_EXAMPLE], backends=backends)

    return {
        "llama": run("llama", ALL, family="llama"),
        "skewed": run("skewed", ALL[::2], family="llama", skewed_backend="torch"),
        "qwen2-lm": run("qwen2-lm", ALL[::2], family="qwen2", task=True),
        "spec": backends_run("keras-hub:tiny:qwen2", backends=ALL[::2]),
    }


def _all_passed(data):
    return all(c["passed"] for r in data["details"]["layers"] for c in r["backends"].values())


def test_a_rotary_spec_passes_with_its_fixed_float32_casts_computed_at_float64(rotary_runs):
    code, text, data = rotary_runs["spec"]
    assert code == 0 and _all_passed(data)
    assert data["details"]["hf_referee"]["first_divergence"] is None
    layers = [r["layer"] for r in data["details"]["layers"]]
    assert "transformer_layer_1/self_attention/rotary_embedding_layer" in layers
    assert "transformer_layer_1/self_attention/attention_softmax" in layers  # float64 now
    assert "computed at float64 the casts to float32 in QwenLayerNorm" in text
    worst = max(
        c["relative_rmse"]
        for r in data["details"]["layers"]
        for c in r["backends"].values()
        if c["relative_rmse"] is not None
    )
    assert worst < 1e-5  # float32 rounding against a float64 referee


def test_a_keras_hub_backbone_file_takes_tokenised_inputs_and_passes_on_every_backend(
    rotary_runs,
):
    code, text, data = rotary_runs["llama"]
    assert code == 0 and _all_passed(data), text
    assert data["details"]["backends"] == ALL
    layers = [r["layer"] for r in data["details"]["layers"]]
    assert layers[0] == "token_embedding" and "transformer_layer_1" in layers
    assert "LlamaLayerNorm" in text  # its fixed float32 casts, widened in the referee


def test_a_rotary_layer_off_on_torch_fails_naming_torch_and_that_layer(rotary_runs):
    from tfparity.examples.keras_hub_backends import SKEWED_LAYER

    code, text, data = rotary_runs["skewed"]
    assert code == 1
    f = data["details"]["first_divergence"]
    assert (f["backend"], f["layer"], f["kind"]) == ("torch", SKEWED_LAYER, "one")
    assert f"first divergence: backend torch, layer {SKEWED_LAYER} (one)" in text
    assert all(r["backends"]["tensorflow"]["passed"] for r in data["details"]["layers"])


def test_a_keras_hub_causal_lm_file_takes_tokenised_inputs_and_passes(rotary_runs):
    code, text, data = rotary_runs["qwen2-lm"]
    assert code == 0 and _all_passed(data), text
    layers = [r["layer"] for r in data["details"]["layers"]]
    # the backbone's call and the logits (the token embedding's reverse call), once each
    # (Keras numbers the backbone's name by the backbones this test process built before)
    backbone = layers[-2]
    assert re.fullmatch(r"qwen_backbone(_\d+)?", backbone) and layers[-1] == "token_embedding#1"
    assert layers.count(f"{backbone}/transformer_layer_0") == 1
