"""The public Python API: each check callable from `tfparity`, returning a Report."""

from __future__ import annotations

import numpy as np
import pytest

import tfparity
from tfparity import Batch, InputOptions

IDS = np.array([[0, 10, 11, 12, 2]], np.int32)


def test_diagnose_names_hidden_states_0_and_accepts_word_embeddings(load_tf_model):
    model = load_tf_model("tiny:bert")
    types = np.zeros_like(IDS)
    hs0 = model.run(Batch(IDS, np.ones_like(IDS), types))["hidden_states[0]"]
    wrong = tfparity.diagnose(model, IDS, hs0, token_type_ids=types)
    assert wrong.passed is False
    assert wrong.details["verdict"] == "post_layernorm"
    assert wrong.details["recovered_ids_match"] == 1.0
    right = tfparity.diagnose(model, IDS, model.word_embeddings().numpy()[IDS])
    assert right.passed is True and right.details["verdict"] == "word_embeddings"


def test_check_tying_and_check_positions_return_reports(load_tf_model):
    model = load_tf_model("tiny:bert")
    inputs = InputOptions(random=2, seq_len=8)
    tying = tfparity.check_tying(model, inputs=inputs, noise_scales=[0, 8], seed=1)
    assert tying.details["roundtrip"]["cosine"] == 1.0
    noise = {n["scale"]: n["recovered"] for n in tying.details["noise"]}
    assert list(noise) == [0.0, 8.0] and noise[0.0] == 1.0 > noise[8.0]
    assert tying.details["tied"] is None  # the base model has no LM head
    positions = tfparity.check_positions(model, inputs=inputs, permutations=3)
    assert positions.passed and positions.details["equivariant"] is True
    assert positions.details["explicit_positions_match"] is True


def test_every_public_name_imports_from_tfparity_without_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys, tfparity; from tfparity import *; "
        "missing = [n for n in tfparity.__all__ if n not in globals()]; "
        "assert not missing, missing; "
        "assert not {'tensorflow', 'torch'} & set(sys.modules), 'a framework was imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_api_names_are_listed_once():
    """tfparity/api.py's public names are listed once, in tfparity/__init__.py (``_API``,
    exported lazily); api.py keeps no ``__all__`` of its own to drift from it. Every
    public function api.py defines is listed and resolves to api's object."""
    import inspect

    from tfparity import api

    assert len(set(tfparity.__all__)) == len(tfparity.__all__), "a name is listed twice"
    assert set(tfparity._API) <= set(tfparity.__all__)
    assert not hasattr(api, "__all__"), "a second list of the API's names"
    defined = {
        name
        for name, value in vars(api).items()
        if inspect.isfunction(value) and value.__module__ == api.__name__
    }
    assert {n for n in defined if not n.startswith("_")} <= set(tfparity._API)
    assert all(getattr(tfparity, n) is getattr(api, n) for n in tfparity._API)


def test_check_modes_passes_a_clean_model_and_fails_a_strict_tolerance(load_tf_model):
    """``tfparity.check_modes`` is ``tfparity modes``'s report: a clean tiny model
    PASSes its modes; with a zero tolerance bf16 (half the mantissa) FAILs, named."""
    from tfparity import Tolerance

    model = load_tf_model("tiny:bert")
    inputs = InputOptions(random=2, seq_len=8)
    clean = tfparity.check_modes(model, devices="cpu", modes="graph,fp16", inputs=inputs)
    assert clean.check == "modes" and clean.passed, clean.failures
    assert [row["mode"] for row in clean.details["modes"]] == ["graph", "fp16"]
    strict = Tolerance(atol=0.0, rtol=0.0)
    broken = tfparity.check_modes(model, devices="cpu", modes=["bf16"], tolerance=strict)
    assert not broken.passed and any("bf16: first differs" in n for n in broken.notes)


@pytest.mark.parametrize(
    "api_arguments, argv",
    [
        ({"modes": ","}, ["--modes", ","]),
        ({"modes": ["eager", "fp8"]}, ["--modes", "eager,fp8"]),
        ({"devices": " "}, None),
    ],
    ids=["no-mode", "unknown-mode", "no-device"],
)
def test_check_modes_refuses_what_the_cli_refuses(api_arguments, argv, capsys):
    """One check of the arguments for both (``ModesOptions.from_arguments``): the API
    raises the message the CLI exits 2 with, before any model loads."""
    from tfparity.cli import main
    from tfparity.errors import TfparityError

    with pytest.raises(TfparityError) as info:
        tfparity.check_modes("tiny:not-loaded", **api_arguments)
    if argv is not None:
        assert main(["modes", "tiny:bert", *argv]) == 2
        assert str(info.value) in capsys.readouterr().err
    with pytest.raises(TypeError, match="tolerance"):
        tfparity.check_modes("tiny:bert", tolerance=1e-3)
