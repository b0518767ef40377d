"""``generate``'s teacher-forced steps get llama.cpp's distribution metrics (each step a
position scored at PyTorch's token, each prompt an item); ``--kl-budget`` judges them
by a bootstrap over prompts: a clean port passes, a broken one fails by the budget's
own row; a malformed budget exits 2 before any model loads."""

from __future__ import annotations

from tfparity import generate
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.cli import main
from tfparity.report.generation import render_generation
from tfparity.testing import perturb_ffn

GPT2 = "tiny:gpt2/causal-lm"
# five prompts: the bootstrap's fewest items (MIN_ITEMS) for an interval and a verdict
PROMPTS = ("The quick brown fox", "Hello world.", "One two three", "It was", "Numbers: 1, 2")
N = 6
BUDGET = "kl_mean=1e-6,same_top1=0.99"


def test_a_clean_port_gets_the_statistics_and_passes_its_budget():
    report = generate(GPT2, new_tokens=N, texts=PROMPTS, embeds=False, kl_budget=BUDGET)
    assert report.passed
    d = report.details["distribution"]
    assert (d["positions"], d["items"]) == (N * len(PROMPTS), len(PROMPTS))
    assert d["items_are"] == "prompts" and d["dp_at"] == "target"
    assert 0 <= d["kl_max"] < 1e-9 and d["same_top1"] == 1.0
    assert abs(d["ln_ppl_ratio"]) < 1e-5
    assert d["budget"]["verdict"] == "PASS"
    text = render_generation(report)
    assert f"{N * len(PROMPTS)} teacher-forced steps over {len(PROMPTS)} prompts" in text
    assert f"distribution budget PASS over {len(PROMPTS)} prompts" in text


def test_a_broken_port_fails_the_budget_by_its_own_row():
    port = TFModel.load(GPT2)
    perturb_ffn(port, 1, 1.5)
    report = generate(port, pt=GPT2, new_tokens=N, texts=PROMPTS, embeds=False, kl_budget=BUDGET)
    assert not report.passed
    d = report.details["distribution"]
    assert d["kl_mean"] > 1e-6 and d["budget"]["verdict"] == "FAIL"
    rows = [c for c in report.failures if c.name == "distribution kl_mean (logits)"]
    assert rows and f"over {len(PROMPTS)} prompts wholly outside" in rows[0].problem


def test_a_malformed_budget_exits_2(capsys):
    assert main(["generate", GPT2, "--kl-budget", "kl_mean=lots"]) == 2
    assert "kl_mean" in capsys.readouterr().err
