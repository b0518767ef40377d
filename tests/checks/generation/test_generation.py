"""``tfparity generate``: greedy generation, TF against PyTorch, on real tiny causal LMs.

Both ways: clean tiny ports of every registered causal LM agree on every token with a
consistent cache; a port whose fault changes greedy tokens fails naming the first
divergent step and the layer the cross-check finds; a fault too small to flip a token
fails too, at its first step whose logits are beyond the referee's noise; faults that
live only in cached decoding, or only in the start from ``inputs_embeds``, fail there
and nowhere else.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfparity import generate
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.architectures import lookup, tiny_types
from tfparity.assertions import assert_generation
from tfparity.cli import main
from tfparity.testing import CACHE_FAULTS, perturb_ffn

CAUSAL = ("gpt2", "gpt-sw3", "opt", "ctrl", "gptj", "xglm", "openai-gpt", "mistral")
PROMPTS = ("The quick brown fox", "Hello world.")
GPT2 = "tiny:gpt2/causal-lm"
N = 8
# the registry's ports without a known difference from PyTorch (openai-gpt's is below)
CLEAN = tuple(t for t in CAUSAL if lookup(t).known_difference is None)


def test_every_registered_causal_lm_with_a_tf_class_is_covered():
    assert set(CAUSAL) == {t for t in tiny_types() if lookup(t).causal}


@pytest.mark.parametrize("model_type", CLEAN)
def test_a_clean_tiny_causal_lm_agrees_on_every_token_and_its_cache(model_type):
    report = generate(f"tiny:{model_type}/causal-lm", new_tokens=N, texts=PROMPTS[:1])
    assert report.passed, [c.problem for c in report.failures]
    assert report.first_divergence is None
    for p in report.details["generation"]:
        assert p["tf_tokens"] == p["pt_tokens"] and p["tokens_agreed"] == N
        assert not p["defects"] and not p["cache_failures"] and not p["embeds_failures"]
        assert p["embeds_tokens"] == p["tf_tokens"]  # started from gathered embeddings
        assert len(p["steps"]) == N
        assert all(s["cache_ok"] for s in p["steps"])
        # a cached model's embeds start leaves the ids start's very state (bitwise), so
        # its decoding is the ids path's; a model without a cache decodes it step by step
        same = p["embeds_same_start"]
        assert same == (report.details["kv_cache"] == "yes")
        assert same or all(s["embeds_ok"] for s in p["steps"])


def test_a_fault_that_changes_greedy_tokens_fails_naming_the_step_and_the_layer():
    port = TFModel.load(GPT2)
    perturb_ffn(port, 1, 1.5)
    report = generate(port, pt=GPT2, new_tokens=N, texts=PROMPTS)
    assert not report.passed
    parted = [p for p in report.details["generation"] if p["first_divergent_step"]]
    assert parted
    first = parted[0]["first_divergent_step"]
    k = first["step"]
    assert parted[0]["tokens_agreed"] == k
    assert parted[0]["tf_tokens"][:k] == parted[0]["pt_tokens"][:k]
    assert first["tf_token"] != first["pt_token"] and not first["near_tie"]
    assert first["tf_margin"] > 0 and first["pt_margin"] > 0
    assert k in parted[0]["defects"]
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (2, 1, "intermediate")
    assert f"first divergent step {k}" in d.hint and "scaled by 1.5" in d.hint
    # the forward pass is broken, the cache is not: every cached step matches recomputation
    assert all(not p["cache_failures"] for p in report.details["generation"])
    problems = [c.problem for c in report.failures if c.name.endswith("tokens")]
    assert any(f"first divergent step {k}" in p for p in problems)


def test_a_fault_too_small_to_flip_a_token_still_fails_naming_the_step_and_layer():
    """A defect that has not yet flipped a token is still a defect."""
    port = TFModel.load(GPT2)
    perturb_ffn(port, 1, 1.1)
    report = generate(port, pt=GPT2, new_tokens=N, texts=PROMPTS, embeds=False)
    assert not report.passed
    rows = report.details["generation"]
    assert all(p["tf_tokens"] == p["pt_tokens"] and not p["defects"] for p in rows)
    assert all(p["referee_failures"] for p in rows)  # the referee sees it at every step
    problem = report.failures[0].problem
    assert problem.startswith("every token agrees, but fed PyTorch's tokens, TF's logits miss")
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (2, 1, "intermediate")
    assert "prompt 0, first failing step 0" in d.hint and "scaled by 1.1" in d.hint
    assert f"`tfparity crosscheck {port.name}` judges" in d.hint  # the spec names its head


def test_a_known_port_difference_fails_generate_as_it_fails_the_crosscheck():
    """transformers' TF OpenAI GPT computes the exact GELU, PyTorch's the tanh one: the
    logits are beyond the noise on every step though the tiny model's tokens agree."""
    report = generate("tiny:openai-gpt/causal-lm", new_tokens=4, texts=PROMPTS[:1])
    assert not report.passed
    (p,) = report.details["generation"]
    assert len(p["referee_failures"]) == 4  # every step, flip or not
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (1, 0, "intermediate")
    assert "a known difference of this port" in d.hint


@pytest.mark.parametrize("fault", CACHE_FAULTS, ids=lambda f: f.name)
def test_a_fault_only_in_cached_decoding_is_caught_by_cache_consistency(fault):
    port = fault.apply(TFModel.load(GPT2))
    report = generate(port, pt=GPT2, new_tokens=N, texts=PROMPTS)
    assert not report.passed
    for p in report.details["generation"]:
        assert p["cache_failures"][0] == fault.first_step
        assert p["steps"][0]["cache_ok"]  # step 0 runs on the prompt, without a cache
        assert not p["embeds_failures"]  # tfparity's own loop does not call the fault
    cache = [c for c in report.failures if c.name.endswith("cache")]
    assert cache and f"cached step {fault.first_step} differs from recomputation" in (
        cache[0].problem
    )


class _ScaledEmbeds(TFModel):
    """A pipeline whose gathered embeddings are off by 1%: only the start from
    ``inputs_embeds`` sees it."""

    def gather(self, input_ids):
        return super().gather(input_ids) * 1.01


def test_a_fault_only_in_the_start_from_embeds_is_caught_there():
    clean = TFModel.load(GPT2)
    port = _ScaledEmbeds(GPT2, clean.model, clean.tokenizer, clean.config, clean.source)
    report = generate(port, pt=GPT2, new_tokens=N, texts=PROMPTS[:1])
    assert not report.passed
    (p,) = report.details["generation"]
    assert p["embeds_failures"][0] == 0 and not p["cache_failures"] and not p["defects"]
    assert [c.name for c in report.failures] == ["prompt 0: from inputs_embeds"]
    assert not p["embeds_same_start"]  # its prefill differs: decoded step by step


def test_an_embeds_start_in_the_ids_start_state_is_not_decoded_again():
    report = generate(GPT2, new_tokens=N, texts=PROMPTS[:1])
    (p,) = report.details["generation"]
    assert p["embeds_same_start"] and p["embeds_tokens"] == p["tf_tokens"]
    assert all(s["embeds_rmse"] is None for s in p["steps"])  # no step decoded again
    assert any("bitwise as the prefill from ids" in n for n in report.notes)


def test_openai_gpt_keeps_no_cache_and_the_report_says_so():
    report = generate("tiny:openai-gpt/causal-lm", new_tokens=4, texts=PROMPTS[:1])
    assert report.details["kv_cache"].startswith("none")
    assert any("keeps no KV cache" in n for n in report.notes)


def test_the_assertion_passes_a_clean_port_and_names_the_step_of_a_broken_one():
    assert_generation(GPT2, new_tokens=4, texts=PROMPTS[:1])
    port = TFModel.load(GPT2)
    perturb_ffn(port, 1, 2.0)
    with pytest.raises(AssertionError) as raised:
        assert_generation(port, GPT2, new_tokens=N, texts=PROMPTS, embeds=False)
    first, *rest = str(raised.value).splitlines()
    assert first.startswith("FAIL generate: prompt") and "first divergent step" in first
    assert any(line.startswith("first divergence: hidden_states[2] · layer 1") for line in rest)


def test_the_cli_exits_1_on_a_saved_broken_port_with_json(tmp_path, capsys):
    port = TFModel.load(GPT2)
    perturb_ffn(port, 1, 1.5)
    port.model.save_pretrained(tmp_path / "port")
    port.tokenizer.save_pretrained(tmp_path / "port")
    out = tmp_path / "report.json"
    texts = ["--text", PROMPTS[0], "--text", PROMPTS[1]]
    argv = ["generate", str(tmp_path / "port"), "--pt", GPT2, "--new-tokens", str(N), *texts]
    argv += ["--no-embeds", "--json", str(out)]
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "FAIL generate" in text and "first divergence: hidden_states[2] · layer 1" in text
    data = json.loads(out.read_text())
    assert data["check"] == "generate" and data["passed"] is False
    assert data["first_divergence"]["layer"] == 1
    assert data["details"]["generation"][0]["steps"][0]["top_k_overlap"] <= 1.0


@pytest.mark.parametrize(
    "argv, words",
    [
        (["tiny:bert"], "not a causal language model"),
        (["tiny:gpt2/sequence-classification"], "has no LM head"),
        (["tiny:gpt2", "--new-tokens", "0"], "new_tokens must be an int >= 1"),
        (["tiny:gpt2", "--new-tokens", "60"], "positions"),
        (["keras-hub:tiny:bert"], "no CausalLM task for BertBackbone"),
    ],
)
def test_bad_input_exits_2_naming_why(argv, words, capsys):
    assert main(["generate", *argv]) == 2
    assert words in capsys.readouterr().err


def test_a_near_tie_flip_is_told_from_a_defect():
    """Numpy only: the same flip, within the referee's noise and far beyond it."""
    from tfparity.checks.generation.steps import Forced, judge_steps

    rng = np.random.default_rng(0)
    truth = rng.standard_normal((2, 50))
    truth[:, 7], truth[:, 9] = 3.0, 3.0 - 1e-9  # PyTorch picks 7 by a hair
    pt = truth + 1e-8 * rng.standard_normal(truth.shape)
    pt[:, 7], pt[:, 9] = truth[:, 7], truth[:, 9]
    tf = pt.copy()
    tf[:, 9] += 2e-9  # TF picks 9: within the noise
    forced = Forced(tf, pt, truth, pt)
    tie = judge_steps(np.array([9, 9]), tf, np.array([7, 7]), forced)
    assert [s.flip for s in tie.steps] == ["near-tie", "near-tie"]
    assert tie.first_divergence.step == 0 and tie.first_divergence.near_tie
    tf[:, 9] += 0.5  # far beyond it
    defect = judge_steps(np.array([9, 9]), tf, np.array([7, 7]), Forced(tf, pt, truth, pt))
    assert defect.defects == [0, 1] and not defect.first_divergence.near_tie


def test_the_cli_takes_a_port_and_its_reference_as_crosscheck_does(tmp_path, capsys):
    """`generate --tf A --pt B` (A the TF port, B its PyTorch reference): the clean port
    passes, the same port saved broken fails at a divergent step; --tf alone exits 2."""
    short = ["--new-tokens", "2", "--text", PROMPTS[0], "--no-embeds"]
    assert main(["generate", "--tf", "tiny:gpt2", "--pt", "tiny:gpt2", *short]) == 0
    assert "PASS generate" in capsys.readouterr().out
    port = TFModel.load(GPT2)
    perturb_ffn(port, 1, 1.5)
    port.model.save_pretrained(tmp_path / "port")
    port.tokenizer.save_pretrained(tmp_path / "port")
    argv = ["generate", "--tf", str(tmp_path / "port"), "--pt", GPT2, "--new-tokens", str(N)]
    assert main([*argv, "--text", PROMPTS[0], "--text", PROMPTS[1], "--no-embeds"]) == 1
    out = capsys.readouterr().out
    assert "FAIL generate" in out and "first divergent step" in out
    assert main(["generate", "--tf", str(tmp_path / "port")]) == 2
    assert "nothing names its PyTorch reference" in capsys.readouterr().err
