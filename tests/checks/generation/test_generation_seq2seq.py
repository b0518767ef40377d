"""``tfparity generate`` on T5/mT5 seq2seq LMs: the prompt feeds the encoder, the
decoder's greedy tokens are judged (:mod:`tfparity.adapters.hf_tf.seq2seq`).

Both ways, on real tiny models: clean tiny T5 and mT5 agree on every decoder token with
a consistent cache and the same tokens from gathered encoder embeddings; a decoder fault
that changes greedy tokens fails at its first divergent step, said to be past the
encoder (the decoder is not localised); an encoder fault is named by the cross-check of
the encoder; a corrupt KV cache fails the cache and nothing else; what cannot be
honoured exits 2 by name.

A decoder defect that flips no token still fails ``generate`` (its teacher-forced logits
are beyond the referee's noise), and ``crosscheck`` judges a seq2seq LM whole: its
encoder's hidden states, its decoder's teacher-forced on the batch's ids, the logits; a
decoder-layer fault is localised to that layer with its weight named.
"""

from __future__ import annotations

import json

import pytest

from tfparity import crosscheck, generate
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.hf_tf.weight_names import tf_weights_by_pt_name
from tfparity.architectures.heads import Head, unsupported
from tfparity.cli import main
from tfparity.errors import TfparityError
from tfparity.orchestration import load_model
from tfparity.report.text import render
from tfparity.testing import CACHE_FAULTS, perturb_ffn, scale

T5 = "tiny:t5"
PROMPTS = ("The quick brown fox", "Hello world.")
N = 4


def _port(spec: str = T5) -> TFModel:
    """A tiny seq2seq LM to break: its class loads only as generate loads it."""
    return TFModel.load(spec, head=Head.SEQ2SEQ_LM, decoders=True)


def _agrees(details: dict) -> None:
    """Every decoder token agrees, the cache holds, the start from embeddings too."""
    assert details["decoding"].startswith("seq2seq: the prompt feeds the encoder")
    for p in details["generation"]:
        assert p["tf_tokens"] == p["pt_tokens"] and p["tokens_agreed"] == N
        assert p["embeds_tokens"] == p["tf_tokens"]  # the encoder fed gathered embeddings
        assert len(p["steps"]) == N
        assert all(s["cache_ok"] and s["embeds_ok"] for s in p["steps"])


def test_the_cli_passes_a_clean_tiny_t5_and_says_it_is_seq2seq(tmp_path, capsys):
    out = tmp_path / "report.json"
    argv = ["generate", T5, "--new-tokens", str(N), "--text", PROMPTS[0], "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "decoding: seq2seq" in text and "PASS generate" in text
    data = json.loads(out.read_text())
    assert data["passed"] is True and data["first_divergence"] is None
    assert data["model"] == T5 and data["details"]["kv_cache"] == "yes"
    _agrees(data["details"])


def test_a_clean_tiny_mt5_agrees_on_every_decoder_token():
    report = generate("tiny:mt5", new_tokens=N, texts=PROMPTS[1:])
    assert report.passed, [c.problem for c in report.failures]
    assert report.first_divergence is None
    _agrees(report.details)


def test_a_t5_checkpoint_directory_generates_as_a_seq2seq_lm(tmp_path):
    from tfparity.adapters.reference.pt_model import load_pt

    saved = load_pt(T5, head=Head.SEQ2SEQ_LM, decoders=True)
    saved.model.save_pretrained(tmp_path)  # PyTorch safetensors, T5ForConditionalGeneration
    _port().tokenizer.save_pretrained(tmp_path)
    report = generate(str(tmp_path), new_tokens=N, texts=PROMPTS[1:], embeds=False)
    assert report.passed, [c.problem for c in report.failures]
    assert report.details["reference"].startswith("T5ForConditionalGeneration")


def test_a_decoder_fault_fails_at_the_first_divergent_step_past_the_encoder():
    port = _port()
    name = "decoder.block.0.layer.2.DenseReluDense.wi.weight"
    scale(tf_weights_by_pt_name(port.model)[name].variable, 3.0)
    report = generate(port, pt=T5, new_tokens=N, texts=PROMPTS, embeds=False)
    assert not report.passed
    parted = [p for p in report.details["generation"] if p["first_divergent_step"]]
    assert parted
    first = parted[0]["first_divergent_step"]
    k = first["step"]
    assert parted[0]["tokens_agreed"] == k and k in parted[0]["defects"]
    assert parted[0]["tf_tokens"][:k] == parted[0]["pt_tokens"][:k]
    assert first["tf_token"] != first["pt_token"] and not first["near_tie"]
    # the encoder is clean: the cross-check of it passes, so the decoder is named, unlocalised
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (None, "decoder")
    assert f"first divergent step {k}" in d.hint
    assert "the cross-check of the encoder on the prompt passes" in d.hint
    # past the clean encoder, the decoder teacher-forced: its layer 0, and the weight
    assert "hidden state 1 (decoder layer 0's output) is the first beyond" in d.hint
    assert f"weight {name} is PyTorch's scaled by 3" in d.hint
    assert all(not p["cache_failures"] for p in report.details["generation"])


def test_an_encoder_fault_is_named_by_the_cross_check_of_the_encoder():
    port = _port()
    perturb_ffn(port, 1, 3.0)  # T5's named FFN weight is the encoder's
    report = generate(port, pt=T5, new_tokens=N, texts=PROMPTS, embeds=False)
    assert not report.passed
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (2, 1)
    assert "the cross-check of the encoder on the prompt finds" in d.hint
    assert "encoder.block.1.layer.1.DenseReluDense.wi.weight" in d.hint and "scaled by 3" in d.hint


def test_a_corrupt_kv_cache_fails_the_cache_and_nothing_else():
    fault = next(f for f in CACHE_FAULTS if "scaled" in f.name)
    port = fault.apply(_port())
    report = generate(port, pt=T5, new_tokens=N, texts=PROMPTS[1:], embeds=False)
    assert not report.passed
    row = report.details["generation"][0]
    assert row["cache_failures"] == list(range(fault.first_step, N))
    assert not row["defects"]  # fed PyTorch's tokens without a cache, TF agrees
    assert [c.name for c in report.failures] == ["prompt 0: cache"]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["generate", "tiny:t5/base"], "t5 model without its decoder"),
        (["generate", T5, "--new-tokens", "0"], "new_tokens must be an int >= 1"),
        (["check", "tiny:t5/seq2seq-lm"], "cannot check seq2seq-lm heads yet"),
        (["gradients", "tiny:mt5/seq2seq-lm"], "only `tfparity crosscheck` (the decoder"),
    ],
)
def test_what_cannot_be_honoured_exits_2_naming_why(argv, words, capsys):
    assert main(argv) == 2
    assert words in capsys.readouterr().err


def test_seq2seq_lms_load_for_generation_only():
    assert unsupported(Head.SEQ2SEQ_LM) is not None
    assert unsupported(Head.SEQ2SEQ_LM, decoders=True) is None
    assert unsupported(Head.MULTIPLE_CHOICE, decoders=True) is not None  # generation's only
    with pytest.raises(TfparityError, match="seq2seq-lm"):
        TFModel.load(T5, head=Head.SEQ2SEQ_LM)
    with pytest.raises(TfparityError, match="seq2seq-lm"):  # the door refuses it too
        load_model(T5 + "/seq2seq-lm")
    assert load_model(T5 + "/seq2seq-lm", decoders=True).head is Head.SEQ2SEQ_LM


# ----------------------------------------------------------------- judged whole
SUBTLE = "decoder.block.1.layer.2.DenseReluDense.wo.weight"


def _broken(scaled_by: float, spec: str = T5) -> TFModel:
    """A tiny seq2seq LM whose decoder layer 1 has its FFN output weight scaled."""
    port = _port(spec)
    scale(tf_weights_by_pt_name(port.model)[SUBTLE].variable, scaled_by)
    return port


@pytest.mark.parametrize("model_type", ["t5", "mt5"])
def test_crosscheck_passes_a_clean_seq2seq_lm_judging_its_decoder(model_type):
    (report,) = crosscheck(f"tiny:{model_type}/seq2seq-lm", reload=False)
    assert report.passed, [c.name for c in report.failures]
    names = [c.name for c in report.comparisons]
    layers = 2  # TINY num_layers, encoder and decoder alike
    for k in range(layers + 1):
        assert f"hidden_states[{k}]" in names and f"decoder_hidden_states[{k}]" in names
    assert "logits" in names and report.details["head"] == "seq2seq-lm"
    assert report.details["agreement"][0]["measure"] == "top-1"  # a vocabulary's logits
    rows = _layer_rows(render(report))
    assert [r[:2] for r in rows] == [
        ["0", "embeddings"],
        ["1", "0"],
        ["2", "1"],
        ["decoder_0", "embeddings"],
        ["decoder_1", "0"],
        ["decoder_2", "1"],
    ]
    assert all(r[-1] == "ok" for r in rows)


def _layer_rows(text: str) -> list[list[str]]:
    """The per-layer table's rows, cells split (``decoder 1`` kept as one cell), and
    nothing of the decoder's left in the tensor table below it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["hidden", "layer"])
    end = lines.index("", start)
    tensors = lines[end : lines.index("", end + 1)]
    assert not any("decoder_hidden_states" in line for line in tensors)
    return [line.replace("decoder ", "decoder_").split() for line in lines[start + 1 : end]]


def test_a_decoder_layer_fault_fails_the_crosscheck_at_that_layer_naming_the_weight():
    (report,) = crosscheck(tf=_broken(1.5), pt="tiny:t5/seq2seq-lm")
    assert not report.passed
    verdicts = {c.name: c.passed for c in report.comparisons}
    assert all(ok for n, ok in verdicts.items() if n.startswith("hidden_states["))
    assert verdicts["decoder_hidden_states[1]"] and not verdicts["decoder_hidden_states[2]"]
    assert not verdicts["logits"]
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.decoder_hidden_state) == (None, "decoder", 2)
    assert "hidden state 2 (decoder layer 1's output) is the first beyond" in d.hint
    assert f"weight {SUBTLE} is PyTorch's scaled by 1.5" in d.hint
    verdict = {r[0]: r[-1] for r in _layer_rows(render(report))}
    assert verdict["decoder_1"] == "ok" and verdict["decoder_2"] == "FAIL"


def test_generate_fails_a_decoder_defect_that_flips_no_token(tmp_path, capsys):
    """The issue's case: every token agrees, the teacher-forced logits do not."""
    port = _broken(1.05)
    port.model.save_pretrained(tmp_path)
    port.tokenizer.save_pretrained(tmp_path)
    out = tmp_path / "report.json"
    argv = ["generate", str(tmp_path), "--pt", T5, "--new-tokens", str(N), "--json", str(out)]
    assert main([*argv, "--text", PROMPTS[0], "--no-embeds"]) == 1
    text = capsys.readouterr().out
    assert "FAIL generate: prompt 0: tokens: every token agrees, but" in text
    data = json.loads(out.read_text())
    row = data["details"]["generation"][0]
    assert row["tf_tokens"] == row["pt_tokens"] and not row["defects"]
    d = data["first_divergence"]
    assert (d["layer"], d["decoder_hidden_state"]) == ("decoder", 2)
    assert "prompt 0, first failing step" in d["hint"] and SUBTLE in d["hint"]
    assert "--head seq2seq-lm` judges every hidden state" in d["hint"]
