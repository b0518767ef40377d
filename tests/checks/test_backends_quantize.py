"""``tfparity backends --quantize`` and a ``.keras`` file already quantised
(docs/backends.md): Keras quantises once on TensorFlow, every backend runs that one
file, and each backend's output is judged against TensorFlow's quantised run and the
float model's float64 referee by the mode's budgets.

Both ways, on the tiny example model of tfparity/examples/keras_backends_model.py, on
TensorFlow and torch: a model whose custom layer is 50% off on torch only fails,
naming torch, while TensorFlow's quantised run stays within budget of the float
referee; the clean model, quantised and saved, is read as it is and passes, its mode
named. The judge is also checked on made-up outputs (numpy only), and what cannot be
asked exits 2 before any process starts.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.keras_backends.inputs import quantised_mode, read_config
from tfparity.adapters.keras_backends.models import save_quantised
from tfparity.checks.backends_quantised import QuantisedOutputs, check_quantised_backends
from tfparity.cli import main
from tfparity.examples.keras_backends_model import save

EXAMPLE = "tfparity.examples.keras_backends_model"
TWO = ["--backends", "tensorflow,torch", "--import", EXAMPLE]
OPTIONS = {"backends": ["tensorflow", "torch"], "imports": [EXAMPLE]}  # TWO, as the API takes it


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The torch-faulty float model, and the clean model quantised to int8 and saved."""
    work = tmp_path_factory.mktemp("quantised")
    faulty = save(work / "torch-fault.keras", fault="torch")
    clean = save(work / "clean.keras")
    quantised = work / "quantised.keras"
    save_quantised(str(clean), str(quantised), "int8", [EXAMPLE])  # here: Keras is on TF
    return faulty, quantised


def test_a_backend_computing_another_quantised_model_is_named(files, backends_run):
    code, text, data = backends_run(str(files[0]), **OPTIONS, quantize="int8")
    assert code == 1
    assert "FAIL backends: backend torch parts from tensorflow's run" in text
    q = data["details"]["quantisation"]
    assert q["mode"] == "int8" and q["logits"] and q["anchor"] == "tensorflow"
    verdicts = {(j["backend"], j["against"]): j["passed"] for j in q["judged"]}
    assert verdicts[("tensorflow", "float64 referee")]  # the quantisation itself is sound
    assert not verdicts[("torch", "tensorflow (quantised)")]


def test_a_file_already_quantised_is_read_as_it_is_and_passes(files, backends_run, capsys):
    assert quantised_mode(read_config(files[1])) == "int8"
    code, text, _ = backends_run(str(files[1]), **OPTIONS)
    assert code == 0
    assert "quantisation: keras int8, quantised in the file (read as it is)" in text
    assert "PASS backends: tensorflow, torch compute the same keras int8 model" in text
    # quantising it again is refused, before any backend runs
    assert main(["backends", str(files[1]), *TWO, "--quantize", "int8"]) == 2
    assert "already quantised (int8" in capsys.readouterr().err


def _outputs(torch_scale: float, float_shift: float) -> QuantisedOutputs:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 6, 32)).astype(np.float32)
    return QuantisedOutputs(
        model="m.keras",
        mode="int8",
        layer="logits",
        runs={"tensorflow": logits, "torch": logits * torch_scale},
        anchor="tensorflow",
        float_truth=logits.astype(np.float64) + float_shift * rng.normal(size=logits.shape),
        referee_backend="tensorflow",
        vocabulary=32,
    )


def test_the_judge_names_the_parting_backend_or_the_quantisation_itself():
    clean = check_quantised_backends(_outputs(1.0, 0.01))
    assert clean.passed and clean.first_divergence is None
    parting = check_quantised_backends(_outputs(1.8, 0.01))
    assert (
        not parting.passed
        and "backend torch parts from tensorflow" in parting.first_divergence.hint
    )
    shared = check_quantised_backends(_outputs(1.0, 1.0))
    assert not shared.passed and "the int8 quantisation itself is over budget" in (
        shared.first_divergence.hint
    )


def test_what_cannot_be_asked_exits_2(files, capsys):
    assert main(["backends", str(files[0]), *TWO, "--kl-budget", "kl_mean=0.01"]) == 2
    assert "give --quantize" in capsys.readouterr().err
    argv = ["backends", str(files[0]), *TWO, "--quantize", "int8", "--gradients"]
    assert main(argv) == 2
    assert "--gradients is not judged on a quantised model" in capsys.readouterr().err
