"""``gradients keras-hub:<SPEC> --backend jax|torch``: the keras-hub side differentiated
in its worker process on another Keras backend, against HF PyTorch with the float64
referee, as on TensorFlow.

One JAX worker for the module: keras-hub:tiny:bert against its own checkpoint (PASS,
its known GELU difference taken out of the reference by --pt-config) and against a copy
with one weight of layer 1 changed (FAIL, localised to layer 1, as on TensorFlow). The
torch backend is tested on a CausalLM task (the head's loss) in
test_remote_generation.py, which holds a torch worker already. The refusals (exit 2)
load nothing.
"""

from __future__ import annotations

import shutil

import pytest

from tfparity import api, cli
from tfparity.errors import TfparityError
from tfparity.orchestration import load_model

TANH_GELU = {"hidden_act": "gelu_pytorch_tanh"}  # keras-hub's BERT's known difference


@pytest.fixture(scope="module")
def bert_on_jax():
    side = load_model("keras-hub:tiny:bert", backend="jax")
    yield side
    side.close()


@pytest.fixture(scope="module")
def layer_1_changed(tmp_path_factory):
    """tiny:bert's checkpoint with one row of layer 1's output projection changed."""
    from safetensors.numpy import load_file, save_file

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir

    port = tmp_path_factory.mktemp("changed") / "bert"
    shutil.copytree(checkpoint_dir("bert"), port)
    weights = load_file(str(port / "model.safetensors"))
    weights["bert.encoder.layer.1.output.dense.weight"][0] += 0.05
    save_file(weights, str(port / "model.safetensors"), metadata={"format": "pt"})
    return str(port)


def test_a_clean_port_on_jax_passes_against_hf_pytorch(bert_on_jax):
    reports = api.gradients(bert_on_jax, pt="tiny:bert", pt_config=TANH_GELU)
    (report,) = reports  # no ids-vs-embeds report: the worker is given token ids only
    assert report.check == "gradients"
    assert report.passed, [c.name for c in report.failures]
    assert report.details["compares"].startswith("Keras 3 on jax (actual)")
    assert any("ran on the jax backend" in n for n in report.notes)
    assert any(n.startswith("Only the TF-vs-PyTorch half ran") for n in report.notes)
    names = {c.name for c in report.comparisons}
    assert {"loss", "grad:hidden_states[0]", "grad:hidden_states[2]"} <= names
    assert "grad:encoder.layer.1.output.dense.weight" in names  # by PyTorch name
    assert "grad:inputs_embeds" not in names


def test_a_changed_weight_fails_on_jax_localised_to_layer_1(bert_on_jax, layer_1_changed):
    (report,) = api.gradients(bert_on_jax, pt=layer_1_changed, pt_config=TANH_GELU)
    assert not report.passed
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (2, 1)  # as on TensorFlow
    assert "encoder.layer.1." in d.hint


def test_without_pytorch_a_remote_side_has_nothing_to_run(bert_on_jax):
    with pytest.raises(TfparityError, match="drop --no-pt"):
        api.gradients(bert_on_jax, pt=False)


def test_backend_on_a_hugging_face_tf_model_exits_2(capsys):
    assert cli.main(["gradients", "tiny:bert", "--backend", "jax"]) == 2
    err = capsys.readouterr().err
    assert "--backend jax runs a keras-hub model" in err and "Traceback" not in err


def test_backend_with_no_pt_exits_2_before_loading(capsys):
    assert cli.main(["gradients", "keras-hub:tiny:bert", "--backend", "jax", "--no-pt"]) == 2
    err = capsys.readouterr().err
    assert "drop --no-pt" in err and "Traceback" not in err
