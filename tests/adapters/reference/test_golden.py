"""Golden outputs: PyTorch's run stored once (--save-outputs) and replayed without
torch (--load-outputs) gives the same verdict; a broken TF model against a good stored
reference fails where the live cross-check fails; wrong or corrupt files are exit 2."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from tfparity.cli import main

INPUTS = ["--random", "4", "--seq-len", "12", "--batch-size", "2", "--seed", "3"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """tiny:bert's PyTorch outputs stored with torch, and the live run's JSON."""
    tmp = tmp_path_factory.mktemp("golden")
    path, live = tmp / "tiny.npz", tmp / "live.json"
    code = main(
        ["crosscheck", "tiny:bert", "--no-reload", *INPUTS, "--save-outputs", str(path)]
        + ["--json", str(live)]
    )
    assert code == 0
    return path, json.loads(live.read_text())


@pytest.fixture
def no_torch(monkeypatch):
    """PyTorch unavailable, as on a CI runner without it."""
    from tfparity.adapters.runtime import imports as runtime
    from tfparity.errors import TfparityError

    def refuse():
        raise TfparityError("PyTorch is needed for this but is not installed.")

    monkeypatch.setattr(runtime, "import_torch", refuse)
    monkeypatch.setattr(runtime, "torch_available", lambda: False)
    for module in ("tfparity.adapters.reference.pt_model", "tfparity.commands.crosscheck"):
        if hasattr(sys.modules.get(module), "import_torch"):
            monkeypatch.setattr(sys.modules[module], "import_torch", refuse)


def test_stored_reference_replayed_without_torch_gives_the_same_verdict(
    saved, no_torch, tmp_path, capsys
):
    path, live = saved
    out = tmp_path / "replayed.json"
    code = main(
        ["crosscheck", "tiny:bert", "--no-reload", *INPUTS, "--load-outputs", str(path)]
        + ["--json", str(out)]
    )
    assert code == 0
    replayed = json.loads(out.read_text())
    assert replayed["passed"] is live["passed"] is True
    assert [(c["name"], c["max_abs_diff"], c["passed"]) for c in replayed["comparisons"]] == [
        (c["name"], c["max_abs_diff"], c["passed"]) for c in live["comparisons"]
    ]
    assert replayed["details"]["layers"] == live["details"]["layers"]  # incl. isolated
    assert "stored in" in replayed["details"]["reference"]
    assert "replayed from" in capsys.readouterr().out


def test_check_uses_the_stored_reference_for_its_crosscheck_pass(saved, no_torch, tmp_path):
    path, _ = saved
    out = tmp_path / "check.json"
    code = main(["check", "tiny:bert", *INPUTS, "--load-outputs", str(path), "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["check"] == "embeds+crosscheck" and data["passed"] is True


def test_broken_tf_model_fails_against_a_stored_good_reference(saved, no_torch):
    from tfparity import InputOptions
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.reference.stored import StoredReference
    from tfparity.api import make_batches
    from tfparity.checks.crosscheck.check import crosscheck
    from tfparity.testing import by_name

    path, _ = saved
    fault = by_name("dropped output bias")
    broken = fault.apply(TFModel.load("tiny:bert"))
    batches = make_batches(broken, InputOptions(random=4, seq_len=12, batch_size=2, seed=3))
    report = crosscheck(broken, StoredReference.load(path, batches), batches)
    assert report.passed is False
    d = report.first_divergence
    expect = fault.expect
    assert (d.hidden_state, d.layer, d.component) == (expect.hidden_state, expect.layer, "output")


T5 = "tiny:t5/seq2seq-lm"
T5_INPUTS = ["--random", "3", "--seq-len", "8", "--batch-size", "3", "--seed", "2"]


@pytest.fixture(scope="module")
def saved_t5(tmp_path_factory):
    """The tiny T5 seq2seq LM's PyTorch outputs stored with torch: its encoder's and
    its teacher-forced decoder's hidden states and the logits."""
    path = tmp_path_factory.mktemp("golden-t5") / "t5.npz"
    code = main(["crosscheck", T5, "--no-reload", *T5_INPUTS, "--save-outputs", str(path)])
    assert code == 0
    return path


def test_a_seq2seq_lm_is_judged_whole_against_its_stored_outputs(saved_t5, no_torch, tmp_path):
    out = tmp_path / "replayed.json"
    argv = ["crosscheck", T5, "--no-reload", *T5_INPUTS, "--load-outputs", str(saved_t5)]
    assert main([*argv, "--json", str(out)]) == 0
    names = {c["name"] for c in json.loads(out.read_text())["comparisons"]}
    decoder = {f"decoder_hidden_states[{k}]" for k in range(3)}  # 2 layers and embeddings
    assert decoder | {"hidden_states[2]", "logits"} <= names


def test_a_decoder_fault_fails_at_its_layer_against_stored_outputs(saved_t5, no_torch, tmp_path):
    """The port saved with its decoder layer-1 FFN output weight scaled, checked against
    the stored reference without torch: FAIL at the decoder's hidden state 2."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.hf_tf.weight_names import tf_weights_by_pt_name
    from tfparity.architectures.heads import Head
    from tfparity.testing import scale

    port = TFModel.load("tiny:t5", head=Head.SEQ2SEQ_LM, decoders=True)
    weight = "decoder.block.1.layer.2.DenseReluDense.wo.weight"
    scale(tf_weights_by_pt_name(port.model)[weight].variable, 1.5)
    port.model.save_pretrained(tmp_path / "port")
    port.tokenizer.save_pretrained(tmp_path / "port")
    out = tmp_path / "broken.json"
    argv = ["crosscheck", "--tf", str(tmp_path / "port"), "--pt", T5, *T5_INPUTS]
    assert main([*argv, "--load-outputs", str(saved_t5), "--json", str(out)]) == 1
    report = json.loads(out.read_text())
    verdicts = {c["name"]: c["passed"] for c in report["comparisons"]}
    assert verdicts["hidden_states[2]"] and verdicts["decoder_hidden_states[1]"]
    assert not verdicts["decoder_hidden_states[2]"]
    assert report["first_divergence"]["decoder_hidden_state"] == 2


def test_inputs_that_do_not_match_the_stored_batches_are_exit_2(saved, no_torch, capsys):
    path, _ = saved
    other = [a if a != "3" else "4" for a in INPUTS]  # another seed: other ids
    code = main(["crosscheck", "tiny:bert", "--no-reload", *other, "--load-outputs", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "differs from the stored one" in err and "same inputs" in err
    fewer = ["--random", "2", "--seq-len", "12", "--batch-size", "2", "--seed", "3"]
    assert main(["crosscheck", "tiny:bert", *fewer, "--load-outputs", str(path)]) == 2
    assert "hold 2 batch(es) but the requested inputs make 1" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"not a zip file", b"PK\x03\x04truncated"])
def test_corrupt_file_is_exit_2(tmp_path, capsys, content):
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    assert main(["crosscheck", "tiny:bert", *INPUTS, "--load-outputs", str(path)]) == 2
    assert "not a readable .npz file" in capsys.readouterr().err


def test_npz_that_tfparity_did_not_write_and_missing_file_are_exit_2(tmp_path, capsys):
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, x=np.zeros(3))
    assert main(["crosscheck", "tiny:bert", *INPUTS, "--load-outputs", str(foreign)]) == 2
    assert "not one tfparity wrote" in capsys.readouterr().err
    missing = tmp_path / "missing.npz"
    assert main(["crosscheck", "tiny:bert", *INPUTS, "--load-outputs", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_save_without_torch_and_conflicting_options_are_exit_2(tmp_path, no_torch, capsys):
    path = str(tmp_path / "x.npz")
    assert main(["check", "tiny:bert", "--save-outputs", path]) == 2
    assert "PyTorch is needed" in capsys.readouterr().err
    assert main(["check", "tiny:bert", "--no-pt", "--load-outputs", path]) == 2
    assert "drop --no-pt" in capsys.readouterr().err
    assert main(["crosscheck", "tiny:bert", "--save-outputs", path, "--load-outputs", path]) == 2


def test_file_layout_round_trip(tmp_path):
    """The documented layout, numpy only: names, order, dtypes survive."""
    from tfparity.golden import Golden, StoredRun, load_reference, save_reference

    ids = np.array([[1, 2, 0]], np.int32)
    run = StoredRun(
        inputs={"input_ids": ids, "attention_mask": (ids > 0).astype(np.int32)},
        fp32={"hidden_states[1]": np.ones((1, 3, 2), np.float32), "pooler_output": np.ones(2)},
        fp64={"hidden_states[1]": np.ones((1, 3, 2)), "pooler_output": np.ones(2)},
        fp32_taps={"layer_0.output": np.full((1, 3, 2), 0.5, np.float32)},
        fp64_taps={"layer_0.output": np.full((1, 3, 2), 0.5)},
    )
    path = tmp_path / "g.npz"
    save_reference(path, Golden("m", "ref", {"model_type": "bert"}, [run], tapped=True))
    with np.load(path) as raw:
        assert "batch_0/fp64/hidden_states[1]" in raw.files
        assert "batch_0/fp32_taps/layer_0.output" in raw.files
        assert json.loads(str(raw["meta"]))["format"] == "tfparity-golden"
    back = load_reference(path)
    assert back.config == {"model_type": "bert"} and back.tapped
    assert list(back.runs[0].fp32) == ["hidden_states[1]", "pooler_output"]
    assert back.runs[0].fp32["hidden_states[1]"].dtype == np.float32
    np.testing.assert_array_equal(back.runs[0].inputs["input_ids"], ids)


def test_a_stored_reference_is_a_reference_that_refuses_what_needs_a_model(saved):
    """Read from a file it is no PyTorch model: it replays its runs (with their taps),
    and gradients, generation and another precision are refused by name (exit 2), not
    an AttributeError on a model it does not hold."""
    from types import SimpleNamespace

    from tfparity.adapters.interfaces.sides import ReferenceBase
    from tfparity.adapters.reference.pt_model import PTModel
    from tfparity.adapters.reference.stored import StoredReference
    from tfparity.errors import TfparityError
    from tfparity.golden import load_reference

    path, _ = saved
    golden = load_reference(path)
    stored = StoredReference("tiny (stored)", SimpleNamespace(**golden.config), golden)
    assert isinstance(stored, ReferenceBase) and not isinstance(stored, PTModel)
    assert stored.localisable() and stored.named_weights() == [] and stored.weights() == {}
    assert stored.in_precision("fp32") is stored
    prompt = np.array([1, 2, 3])
    refusals = {
        "gradients check needs a live PyTorch model": lambda: stored.gradients(None, None),
        "judges TF against PyTorch generate": lambda: stored.greedy(prompt, 2),
        "needs a live Hugging Face PyTorch LM": lambda: stored.step_logits(prompt, prompt),
        "PyTorch generate": lambda: stored.encoder(),
        "a cross-check in fp16 needs the live PyTorch model": lambda: stored.in_precision("fp16"),
    }
    for words, call in refusals.items():
        with pytest.raises(TfparityError) as refused:
            call()
        assert "tiny (stored) is stored outputs (a golden file" in str(refused.value), words
        assert words in str(refused.value)
