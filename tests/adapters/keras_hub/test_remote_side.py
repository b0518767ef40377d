"""``crosscheck keras-hub:<SPEC> --backend jax|torch``: the keras-hub backbone runs on
another Keras backend in a worker process of its own, against HF PyTorch as on
TensorFlow.

One worker per module: keras-hub:tiny:bert converted once and run on JAX, judged
against its own checkpoint (PASS, with its known GELU difference taken out of the
reference by --pt-config, as docs/keras-hub.md does) and against a copy of that
checkpoint with one weight of layer 1 changed (FAIL, localised to layer 1, as on
TensorFlow). The same worker answers ``gradients --backend jax`` (TF-vs-PyTorch only:
the worker is given token ids), passing and failing at layer 1 alike. The refusals
(exit 2) load nothing.
"""

from __future__ import annotations

import shutil

import pytest

from tfparity import api, cli
from tfparity.errors import TfparityError
from tfparity.orchestration import load_model

TANH_GELU = {"hidden_act": "gelu_pytorch_tanh"}  # keras-hub's BERT's known difference


@pytest.fixture(scope="module")
def on_jax():
    side = load_model("keras-hub:tiny:bert", backend="jax")
    yield side
    side.close()


@pytest.fixture(scope="module")
def changed_checkpoint(tmp_path_factory):
    """A copy of tiny:bert's checkpoint with one row of layer 1's output projection
    changed: the port (the original) then differs from it from layer 1 on."""
    from safetensors.numpy import load_file, save_file

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir

    port = tmp_path_factory.mktemp("changed") / "bert"
    shutil.copytree(checkpoint_dir("bert"), port)
    weights = load_file(str(port / "model.safetensors"))
    weights["bert.encoder.layer.1.output.dense.weight"][0] += 0.05
    save_file(weights, str(port / "model.safetensors"), metadata={"format": "pt"})
    return str(port)


def test_a_clean_port_on_jax_passes_against_hf_pytorch(on_jax):
    (report,) = api.crosscheck(tf=on_jax, pt="tiny:bert", pt_config=TANH_GELU)
    assert report.passed, [c.name for c in report.failures]
    assert on_jax.name.endswith("[jax]")
    assert any("ran on the jax backend" in n for n in report.notes)
    assert report.details["compares"].startswith("Keras 3 on jax (actual)")
    compared = {c.name for c in report.comparisons}
    assert {"hidden_states[0]", "hidden_states[2]", "pooler_output"} <= compared


def test_a_changed_weight_fails_on_jax_localised_to_its_layer(on_jax, changed_checkpoint):
    (report,) = api.crosscheck(tf=on_jax, pt=changed_checkpoint, pt_config=TANH_GELU)
    assert not report.passed
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (2, 1, None)  # the layer, not below


def test_the_worker_refuses_what_it_cannot_run(on_jax):
    """No inputs_embeds across processes (nor its gradients), no generation from a
    backbone: exit 2, by name."""
    from tfparity.errors import TfparityError

    with pytest.raises(TfparityError, match="jax backend"):
        on_jax.run_gathered(None)
    with pytest.raises(TfparityError, match="given token ids only"):
        on_jax.gradients(None, None, embeds=True)
    with pytest.raises(TfparityError, match="cannot generate with"):
        on_jax.generator()  # a backbone: no LM head, on any backend


def test_backend_without_a_keras_hub_spec_exits_2(capsys):
    assert cli.main(["crosscheck", "tiny:bert", "--backend", "torch"]) == 2
    err = capsys.readouterr().err
    assert "--backend torch runs a keras-hub model" in err and "Traceback" not in err


def test_a_backend_not_installed_exits_2_with_its_pip_command(monkeypatch, capsys):
    from tfparity.adapters.keras_hub import remote

    monkeypatch.setattr(remote, "installed", lambda backend: False)
    assert cli.main(["crosscheck", "keras-hub:tiny:bert", "--backend", "jax"]) == 2
    assert "pip install 'tfparity[jax]'" in capsys.readouterr().err


def test_commands_not_built_for_backend_refuse_it(capsys):
    assert cli.main(["sweep", "keras-hub:tiny:bert", "--backend", "jax"]) == 2
    assert "built for `tfparity crosscheck`" in capsys.readouterr().err


# gradients --backend: the same worker answers a gradients request (remote.py)


def test_gradients_of_a_clean_port_on_jax_pass_against_hf_pytorch(on_jax):
    reports = api.gradients(on_jax, pt="tiny:bert", pt_config=TANH_GELU)
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


def test_gradients_of_a_changed_weight_fail_on_jax_localised_to_layer_1(on_jax, changed_checkpoint):
    (report,) = api.gradients(on_jax, pt=changed_checkpoint, pt_config=TANH_GELU)
    assert not report.passed
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (2, 1)  # as on TensorFlow
    assert "encoder.layer.1." in d.hint


def test_gradients_without_pytorch_have_nothing_to_run_on_a_remote_side(on_jax):
    with pytest.raises(TfparityError, match="drop --no-pt"):
        api.gradients(on_jax, pt=False)


def test_gradients_backend_on_a_hugging_face_tf_model_exits_2(capsys):
    assert cli.main(["gradients", "tiny:bert", "--backend", "jax"]) == 2
    err = capsys.readouterr().err
    assert "--backend jax runs a keras-hub model" in err and "Traceback" not in err


def test_gradients_backend_with_no_pt_exits_2_before_loading(capsys):
    assert cli.main(["gradients", "keras-hub:tiny:bert", "--backend", "jax", "--no-pt"]) == 2
    err = capsys.readouterr().err
    assert "drop --no-pt" in err and "Traceback" not in err
