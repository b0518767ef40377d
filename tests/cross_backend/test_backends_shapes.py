"""``tfparity backends`` on Keras 3 models shaped as people save them: a subclassed
``keras.Model`` (registered by an --import module), a ``MultiHeadAttention`` classifier
with ``--gradients`` (its key bias has a gradient of exactly 0), and the refusals that
name their cause (a quantised attention Keras cannot reload, an --import that fails).

Every real run is on TensorFlow and JAX with the same --import, so they share two warm
backend processes (tests/conftest.py SHARING); each model runs once per module.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.keras_backends.launch import installed

SHAPES = "tfparity.examples.keras_backends_model"  # the shaped models live beside the others
TWO = ["tensorflow", "jax"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, backends_run):
    """(code, text, JSON) per model: the subclassed classifier clean and 0.1% off on
    JAX (with --gradients), the attention classifier clean and with its gradient 0.1%
    off on JAX (--gradients)."""
    if not installed("jax"):
        pytest.skip("jax is not installed")
    from tfparity.examples.keras_backends_model import save_shaped as save

    root = tmp_path_factory.mktemp("shapes")
    ids = root / "ids.npz"
    np.savez(ids, token_ids=np.random.default_rng(0).integers(0, 64, (2, 8)).astype("int32"))
    options = {"backends": TWO, "imports": [SHAPES], "gradients": True}
    models = {
        "subclassed": ("subclassed", None, {"inputs": str(ids)}),
        "subclassed-jax": ("subclassed", "jax", {"inputs": str(ids)}),
        "attention": ("attention", None, {}),
        "attention-jax": ("attention", "jax_gradient", {}),
    }
    return {
        name: backends_run(str(save(root / f"{name}.keras", build, fault=fault)), **options, **more)
        for name, (build, fault, more) in models.items()
    }


def test_a_subclassed_model_runs_with_its_sublayers_tapped_and_passes_clean(runs):
    code, text, data = runs["subclassed"]
    d = data["details"]
    assert code == 0 and d["first_divergence"] is None
    layers = [row["layer"] for row in d["layers"]]
    assert layers == ["embedding", "dense", "residual", "norm", "logits", "output"]
    assert "what its own call computes between them" in text  # what cannot be tapped
    grads = [row["gradient"] for row in d["gradients"]["rows"]]
    assert grads[0] == "logits/kernel" and "residual/alpha" in grads


def test_a_subclassed_model_off_on_one_backend_fails_naming_it_and_the_sublayer(runs):
    code, text, data = runs["subclassed-jax"]
    f = data["details"]["first_divergence"]
    assert code == 1 and (f["backend"], f["layer"], f["kind"]) == ("jax", "residual", "one")
    assert "FAIL backends: backend jax parts from tensorflow" in text


def test_a_zero_gradient_is_judged_in_its_layers_scale_and_the_clean_attention_passes(runs):
    code, text, data = runs["attention"]
    rows = {row["gradient"]: row for row in data["details"]["gradients"]["rows"]}
    assert code == 0 and data["passed"]
    zero = rows["mha/key/bias"]["zero"]  # softmax is invariant to the key bias
    assert zero["of"] == "layer mha" and zero["rms"] < 1e-10 * zero["scale"]
    assert all(c["passed"] for c in rows["mha/key/bias"]["backends"].values())
    assert [name for name, row in rows.items() if "zero" in row] == ["mha/key/bias"]
    assert "mha/key/bias *" in text and "* zero in exact arithmetic" in text


def test_a_gradient_off_on_one_backend_still_fails_named_beside_a_zero_gradient(runs):
    code, text, data = runs["attention-jax"]
    g = data["details"]["gradients"]
    f = g["first_divergence"]
    assert code == 1 and data["details"]["first_divergence"] is None  # forward agrees
    assert (f["backend"], f["kind"], f["gradient"], f["layer"]) == (
        "jax",
        "one",
        "mha:output",
        "skew",
    )
    rows = {row["gradient"]: row["backends"] for row in g["rows"]}
    assert not rows["mha/query/kernel"]["jax"]["passed"]  # the layer's weights fail too
    assert all(c["passed"] for c in rows["mha/key/bias"].values())  # 1.001 x 0 is 0


def test_a_quantised_attention_keras_cannot_reload_exits_2_saying_so_and_what_to_check(
    runs, tmp_path, tfparity_backend_workers
):
    import tfparity
    from tfparity.errors import TfparityError
    from tfparity.examples.keras_backends_model import save_shaped as save

    path = save(tmp_path / "attention.keras")
    with pytest.raises(TfparityError) as raised:
        tfparity.backends(
            str(path),
            backends=TWO,
            imports=[SHAPES],
            quantize="int8",
            workers=tfparity_backend_workers,
        )
    message = str(raised.value)
    assert "cannot reload the model it quantised to int8 (in MultiHeadAttention mha)" in message
    assert "Check the float model across backends" in message


def test_an_import_that_cannot_be_found_exits_2_naming_it_before_any_process(tmp_path, capsys):
    from tfparity.cli import main

    model = str(tmp_path / "absent.keras")
    assert main(["backends", model, "--import", "no_such_module_xyz"]) == 2
    err = capsys.readouterr().err
    assert "--import no_such_module_xyz: no module named no_such_module_xyz" in err


def test_an_import_that_raises_exits_2_naming_it(tmp_path, monkeypatch, tfparity_backend_workers):
    import tfparity
    from tfparity.errors import TfparityError

    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{__import__('os').environ.get('PYTHONPATH', '')}")
    from tfparity.examples.keras_backends_model import save

    path = save(tmp_path / "model.keras")
    with pytest.raises(TfparityError, match="--import raises_on_import failed: RuntimeError: boom"):
        tfparity.backends(
            str(path),
            backends=["tensorflow"],
            imports=["raises_on_import"],
            workers=tfparity_backend_workers,
        )
