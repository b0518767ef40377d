"""``tfparity backends --quantize`` and a ``.keras`` file already quantised
(docs/backends.md): Keras quantises once on TensorFlow, every backend runs that one
file, the backends are judged against each other layer by layer at the float
cross-backend ceiling, and apart from that each backend's output against the float
model's float64 referee by the mode's budget.

Both ways, on models shaped like users': the example functional model (its custom layer
0.1% off on JAX only: named at that layer; clean and saved quantised: passes), and a
keras-hub GPT-2 ``CausalLM`` from the tiny HF checkpoint, judged at its logits (clean,
saved int8: passes); the spec ``keras-hub:tiny:gpt2/causal-lm`` under ``--quantize
int8``, prepared as its task, not its backbone (clean: passes at its logits, with the
distribution budget; its logits 0.1% off on torch only: named at
``token_embedding#1``, the call that makes them). The judge is also checked on
made-up outputs (numpy only), and what cannot be asked exits 2 before any process
starts.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tfparity.adapters.keras_backends.inputs import read_config
from tfparity.adapters.keras_backends.model_files import save_quantised
from tfparity.adapters.tf_common.quantize import quantised_mode
from tfparity.cli import main
from tfparity.cross_backend.quantised import (
    QuantisedOutputs,
    check_quantised_backends,
    judge_across,
    parting,
)
from tfparity.examples.keras_backends_model import save
from tfparity.report.html import render_html

EXAMPLE = "tfparity.examples.keras_backends_model"
FAULT = "tfparity.examples.keras_hub_logits_fault"  # torch's logits x1.001
TWO = ["--backends", "tensorflow,torch", "--import", EXAMPLE]
OPTIONS = {"backends": ["tensorflow", "torch"], "imports": [EXAMPLE]}  # TWO, as the API takes it
LAYERS = ["embedding", "dense_1", "residual", "norm", "dense_2"]
LM_SPEC = "keras-hub:tiny:gpt2/causal-lm"  # names the task: judged at its logits


def _causal_lm(work):
    """keras-hub's GPT2CausalLM on the tiny GPT-2 checkpoint (no preprocessor), saved
    int8, and seeded inputs in its inputs' order."""
    import keras_hub

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.tf_common.quantize import quantize

    backbone = keras_hub.models.Backbone.from_preset(str(checkpoint_dir("gpt2")))
    lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    quantize(lm, "int8")
    lm.save(work / "lm-int8.keras")
    ids = np.random.default_rng(0).integers(0, backbone.vocabulary_size, (2, 8))
    feed = {t.name: np.ones((2, 8), "int32") for t in lm.inputs}
    feed["token_ids"] = ids.astype("int32")
    np.savez(work / "lm-inputs.npz", **{n: feed[n] for n in (t.name for t in lm.inputs)})
    return work / "lm-int8.keras", work / "lm-inputs.npz"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The JAX-faulty float model, the clean model quantised to int8 and saved, and the
    keras-hub CausalLM saved int8 with its inputs."""
    work = tmp_path_factory.mktemp("quantised")
    faulty = save(work / "jax-fault.keras", fault="jax")
    clean = save(work / "clean.keras")
    quantised = work / "quantised.keras"
    save_quantised(str(clean), str(quantised), "int8", [EXAMPLE])  # here: Keras is on TF
    lm_int8, lm_inputs = _causal_lm(work)
    return {"faulty": faulty, "quantised": quantised, "lm_int8": lm_int8, "in": lm_inputs}


@pytest.fixture(scope="module")
def hub_lm(backends_run):
    """The causal-LM spec quantised to int8 on TensorFlow and torch, clean (its
    processes those of test_backends_hub.py's BERT runs: the same imports)."""
    return backends_run(LM_SPEC, backends=["tensorflow", "torch"], quantize="int8")


def _cells(data, layer):
    return next(r["backends"] for r in data["details"]["layers"] if r["layer"] == layer)


def test_a_backend_computing_another_quantised_model_is_named_at_its_layer(files, backends_run):
    """JAX's custom layer is 0.1% off: a thousandth of the output, where the int8
    budget allows 5% of it (mean abs error), so only the backends judged against each
    other catch it, at the layer that holds it."""
    options = {"backends": ["tensorflow", "jax"], "imports": [EXAMPLE]}
    code, text, data = backends_run(str(files["faulty"]), **options, quantize="int8")
    assert code == 1
    d = data["details"]
    assert (
        "FAIL backends: backend jax parts from tensorflow on the same quantised model at " in text
    )
    assert "layer residual" in text.splitlines()[-1]
    assert (
        d["first_divergence"]["backend"] == "jax" and d["first_divergence"]["layer"] == "residual"
    )
    assert [r["layer"] for r in d["layers"]] == LAYERS  # layer by layer, not the output only
    for layer in LAYERS[:2]:  # before the fault: float32 rounding, far below the ceiling
        assert all(c["passed"] and c["relative_rmse"] < 1e-5 for c in _cells(data, layer).values())
    assert 5e-4 < _cells(data, "residual")["jax"]["relative_rmse"] < 2e-3
    q = d["quantisation"]
    assert q["mode"] == "int8" and q["logits"] and q["output"] == "dense_2"
    # the budget line judges quantised vs float only: the quantisation itself is sound
    assert {j["against"] for j in q["judged"]} == {"float64 referee"}
    assert all(j["passed"] for j in q["judged"])
    assert "int8 budget, quantised vs the float model at float64 on tensorflow" in text


def test_a_file_already_quantised_is_read_as_it_is_and_passes(files, backends_run, capsys):
    assert quantised_mode(read_config(files["quantised"])) == "int8"
    code, text, data = backends_run(str(files["quantised"]), **OPTIONS)
    assert code == 0
    assert "quantisation: keras int8, quantised in the file (read as it is)" in text
    assert "PASS backends: tensorflow, torch compute the same keras int8 model at 5 layers" in text
    assert data["details"]["quantisation"]["judged"] == []  # no float model: no budget
    # quantising it again is refused, before any backend runs
    assert main(["backends", str(files["quantised"]), *TWO, "--quantize", "int8"]) == 2
    assert "already quantised (int8" in capsys.readouterr().err


def test_a_keras_hub_causal_lm_saved_int8_is_judged_at_its_logits(files, backends_run):
    """The task's output is its logits (``token_embedding`` called again, reverse=True),
    not the backbone's embedding lookup that ``layer.output`` would give; every
    transformer sublayer is compared too."""
    code, text, data = backends_run(str(files["lm_int8"]), **OPTIONS, inputs=str(files["in"]))
    assert code == 0, text
    d = data["details"]
    q = d["quantisation"]
    assert q["output"] == "token_embedding#1" and q["logits"]
    assert d["layers"][-1]["layer"] == "token_embedding#1"
    layers = [r["layer"] for r in d["layers"]]
    # (Keras numbers the backbone's name by the backbones this test process built before)
    ffn = re.compile(r"gpt2_backbone(_\d+)?/transformer_layer_1/feedforward_output_dense")
    assert any(ffn.fullmatch(layer) for layer in layers)
    worst = max(c["relative_rmse"] for r in d["layers"] for c in r["backends"].values())
    assert worst < 1e-5  # float32 rounding on the int8 model, far below the ceiling


def test_a_keras_hub_causal_lm_spec_is_quantised_as_its_task_and_judged_at_its_logits(hub_lm):
    """The spec names a task: its logits are the output judged, across the backends and
    by the int8 budget's distribution terms (KL, same top-1), not the backbone's
    ``sequence_output``."""
    code, text, data = hub_lm
    assert code == 0, text
    d = data["details"]
    q = d["quantisation"]
    assert (q["mode"], q["output"], q["logits"]) == ("int8", "token_embedding#1", True)
    assert d["layers"][-1]["layer"] == "token_embedding#1"
    assert all(j["distribution"] and j["against"] == "float64 referee" for j in q["judged"])
    assert "at the output token_embedding#1 (logits over the vocabulary)" in text
    worst = max(c["relative_rmse"] for r in d["layers"] for c in r["backends"].values())
    assert worst < 1e-5  # float32 rounding on the int8 model, far below the ceiling


def test_a_torch_only_logits_fault_in_a_quantised_causal_lm_is_named(backends_run):
    code, text, data = backends_run(
        LM_SPEC, backends=["tensorflow", "torch"], imports=[FAULT], quantize="int8"
    )
    assert code == 1
    f = data["details"]["first_divergence"]
    assert (f["backend"], f["layer"], f["kind"]) == ("torch", "token_embedding#1", "one")
    rows = data["details"]["layers"]
    assert all(c["passed"] for r in rows[:-1] for c in r["backends"].values())  # only the logits
    q = data["details"]["quantisation"]
    assert q["logits"] and all(j["distribution"] for j in q["judged"])  # KL on the logits too
    tensorflow = next(j for j in q["judged"] if j["backend"] == "tensorflow")
    assert tensorflow["passed"]  # the quantisation itself within its budget


def _outputs(torch_scale: float, float_shift: float, backends=("tensorflow", "torch")):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 6, 32)).astype(np.float32)
    runs = {b: {"logits": logits * (torch_scale if b == "torch" else 1.0)} for b in backends}
    return QuantisedOutputs(
        model="m.keras",
        mode="int8",
        runs=runs,
        anchor="tensorflow",
        float_truth={
            "logits": logits.astype(np.float64) + float_shift * rng.normal(size=logits.shape)
        },
        referee_backend="tensorflow",
        vocabulary=32,
    )


def test_the_judge_names_the_parting_backend_or_the_quantisation_itself():
    clean = check_quantised_backends(_outputs(1.0, 0.01))
    assert clean.passed and clean.first_divergence is None
    parting_ = check_quantised_backends(_outputs(1.001, 0.01))  # 0.1%, within the budget
    assert not parting_.passed
    assert parting_.details["first_divergence"]["backend"] == "torch"
    page = render_html([parting_], {})  # the HTML report reads the same layer rows
    assert '<tr class="fail"><td class="name">logits</td>' in page
    assert "FAIL backends: backend torch parts from tensorflow on the same quantised" in page
    three = check_quantised_backends(_outputs(1.001, 0.01, ("tensorflow", "jax", "torch")))
    assert three.details["first_divergence"]["backends"] == ["torch"]  # the others agree
    shared = check_quantised_backends(_outputs(1.0, 1.0))
    assert not shared.passed and "the int8 quantisation itself is over budget" in (
        shared.first_divergence.hint
    )


def test_with_two_backends_the_anchor_is_taken_as_right_and_three_tell():
    x = np.linspace(-1.0, 1.0, 64)
    j = judge_across("dense", {"tensorflow": x * 1.001, "torch": x}, "tensorflow", 1e-4)
    assert j.failing == ["tensorflow", "torch"]  # two that disagree: both rows fail
    assert parting(j, ["tensorflow", "torch"], "tensorflow")["backend"] == "torch"
    outputs = {"tensorflow": x * 1.001, "jax": x, "torch": x + 1e-9}
    j = judge_across("dense", outputs, "tensorflow", 1e-4)
    assert parting(j, list(outputs), "tensorflow")["backends"] == ["tensorflow"]


def test_what_cannot_be_asked_exits_2(files, capsys):
    assert main(["backends", str(files["faulty"]), *TWO, "--kl-budget", "kl_mean=0.01"]) == 2
    assert "give --quantize" in capsys.readouterr().err
    argv = ["backends", str(files["faulty"]), *TWO, "--quantize", "int8", "--gradients"]
    assert main(argv) == 2
    assert "--gradients is not judged on a quantised model" in capsys.readouterr().err
