"""``--kl-budget`` on golden-output runs (docs/golden-outputs.md): the stored file holds
the reference's logits, so the distribution metrics and their bootstrap verdict are
computed against them as against a live PyTorch model; ``--save-outputs`` judges against
the run it captures and records nothing more.

Both ways, on a real tiny BERT masked LM: the clean port passes against the file it
saved; a port with noise on its LM output bias fails against that file, with the failing
term's row; a file without logits is exit 2, saying so.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.cli import main

SPEC = "tiny:bert/masked-lm"
BUDGET = "kl_mean=0.001,same_top1=0.99"


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> str:
    """PyTorch's outputs for the default sentences, saved once (itself a budgeted run)."""
    path = str(tmp_path_factory.mktemp("golden") / "bert.npz")
    argv = ["crosscheck", SPEC, "--no-reload", "--save-outputs", path, "--kl-budget", BUDGET]
    assert main(argv) == 0
    return path


def test_a_clean_port_passes_the_kl_budget_against_its_stored_outputs(golden, capsys):
    capsys.readouterr()
    argv = ["crosscheck", SPEC, "--no-reload", "--load-outputs", golden, "--kl-budget", BUDGET]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "reference: " in out and "stored in" in out
    assert "distribution budget PASS over 5 sequences" in out


def test_a_noisy_lm_head_fails_the_kl_budget_against_the_stored_outputs(golden, tmp_path, capsys):
    port = TFModel.load(SPEC)
    (bias,) = [v for v in port.model.weights if "predictions/bias" in v.name]
    noise = np.random.default_rng(0).normal(size=bias.shape).astype(np.float32)
    bias.assign(bias.numpy() + 2 * noise)
    port.model.save_pretrained(tmp_path / "noisy")
    port.tokenizer.save_pretrained(tmp_path / "noisy")
    out = tmp_path / "report.json"
    argv = ["crosscheck", str(tmp_path / "noisy"), "--no-reload", "--load-outputs", golden]
    assert main([*argv, "--kl-budget", BUDGET, "--json", str(out)]) == 1
    assert "distribution budget FAIL over 5 sequences" in capsys.readouterr().out
    report = json.loads(out.read_text())  # one report: the object itself
    assert report["details"]["distribution"]["kl_mean"] > 0.01
    failing = {c["name"] for c in report["comparisons"] if not c["passed"]}
    assert "distribution kl_mean (logits)" in failing


def test_a_stored_file_without_logits_is_exit_2_saying_so(golden, tmp_path, capsys):
    with np.load(golden, allow_pickle=False) as data:
        arrays = {n: data[n] for n in data.files if not n.endswith("/logits")}
    meta = json.loads(str(arrays["meta"]))
    for entry in meta["order"]:
        entry["trace"] = [n for n in entry["trace"] if n != "logits"]
    arrays["meta"] = np.array(json.dumps(meta))
    stripped = tmp_path / "no-logits.npz"
    np.savez_compressed(stripped, **arrays)
    capsys.readouterr()
    argv = ["crosscheck", SPEC, "--no-reload", "--load-outputs", str(stripped)]
    assert main([*argv, "--kl-budget", BUDGET]) == 2
    err = capsys.readouterr().err
    assert "holds none" in err and "--save-outputs" in err and "Traceback" not in err
