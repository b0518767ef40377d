"""``tfparity sweep``'s distribution metrics (llama.cpp's KL statistics) and
``--kl-budget``, judged by a bootstrap over items.

Both ways on the tiny GPT-2 causal LM: clean, every item's record carries its sums and
the budget passes; with layer 1's MLP scaled by 1.5 the budget fails (exit 1), and so
does a clean sweep under a budget tighter than float32 rounding. Shards merge to the
unsharded statistics; the per-item sums give exactly the statistics and the bootstrap
interval of the positions themselves; a malformed budget is exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.cli import main
from tfparity.compare.bootstrap import bootstrap_verdict, parse_limits
from tfparity.compare.distribution import PositionMetrics, summarise
from tfparity.report.sweep import render_summary
from tfparity.sweep import Shard, SweepOptions, run_sweep
from tfparity.sweep import summarise as summarise_lines
from tfparity.sweep.distribution import DistributionTally, budget_verdict, item_values, statistics
from tfparity.sweep.summary import sweep_passed
from tfparity.testing import perturb_ffn

GPT2 = "tiny:gpt2/causal-lm"
BUDGET = "kl_mean=1e-6,same_top1=0.9"
TEXTS = (
    "The quick brown fox jumps over the lazy dog",
    "Hello world.",
    "Numerical parity means that two implementations agree",
    "A sweep decodes every line of its corpus",
    "Short",
    "Quantised models are judged by their KL divergence",
)


def records(out: Path) -> dict[int, dict]:
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {r["index"]: r for r in lines}


def options(**kw) -> SweepOptions:
    return SweepOptions(
        ("crosscheck",), progress="none", kl_budget=tuple(parse_limits(BUDGET)), **kw
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("kl") / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def clean(load_tf_model, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "out"
    return run_sweep(load_tf_model(GPT2), corpus, out, options(batch_size=4), pt=GPT2)


def test_a_clean_causal_lm_sweep_gets_the_statistics_and_passes_its_budget(clean):
    assert clean.passed
    for r in records(clean.out).values():
        d = r["checks"]["crosscheck"]["distribution"]
        assert d["positions"] == r["tokens"] - 1  # scored at the next token, as llama.cpp
        assert d["same_top1"] == d["positions"] and d["dp_at"] == "target"
        assert 0 <= d["kl_max"] < 1e-9 and abs(d["nll_actual_sum"] - d["nll_ref_sum"]) < 1e-4
    stats = clean.summary["distribution"]["crosscheck"]
    tokens = sum(r["tokens"] - 1 for r in records(clean.out).values())
    assert (stats["positions"], stats["items"], stats["same_top1"]) == (tokens, 6, 1.0)
    assert stats["kl_mean"] < 1e-9 and abs(stats["ln_ppl_ratio"]) < 1e-5
    budget = stats["budget"]
    assert budget["verdict"] == "PASS" and budget["items"] == 6
    assert [t["verdict"] for t in budget["terms"]] == ["PASS", "PASS"]
    text = render_summary(clean.summary, str(clean.out))
    assert "crosscheck: " + f"{tokens} positions over 6 items" in text
    assert "budget: PASS, 95% bootstrap interval over 6 items" in text


def test_a_broken_layer_fails_the_budget(corpus, tmp_path):
    port = TFModel.load(GPT2)
    perturb_ffn(port, 1, 1.5)
    result = run_sweep(port, corpus, tmp_path / "out", options(batch_size=4), pt=GPT2)
    budget = result.summary["distribution"]["crosscheck"]["budget"]
    assert budget["verdict"] == "FAIL" and not result.passed
    kl = budget["terms"][0]
    assert kl["limit"]["metric"] == "kl_mean" and kl["low"] > 1e-6 and kl["verdict"] == "FAIL"
    assert "--kl-budget FAIL (crosscheck)" in render_summary(result.summary, "out")


def test_a_budget_alone_fails_a_sweep_whose_items_pass(corpus, tmp_path, capsys):
    """The clean model's KL is float32 rounding (~1e-15); a budget below it fails the
    sweep (exit 1) though every item passes the referee."""
    argv = ["sweep", GPT2, "--texts", str(corpus), "--checks", "crosscheck"]
    argv += ["--out", str(tmp_path / "o"), "--progress", "none", "--kl-budget", "kl_max=1e-30"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "6/6 items passed; --kl-budget FAIL (crosscheck)" in out
    assert out.strip().splitlines()[-1].startswith("FAIL sweep")


def test_merged_shards_give_the_unsharded_statistics(clean, load_tf_model, corpus, tmp_path):
    tiny = load_tf_model(GPT2)
    dirs = []
    for k in (0, 1):
        opts = options(batch_size=2, shard=Shard(k, 2))
        dirs.append(str(run_sweep(tiny, corpus, tmp_path / f"s{k}", opts, pt=GPT2).out))
    assert main(["merge", *dirs, "--out", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "summary.json").read_text())["distribution"]
    full = clean.summary["distribution"]
    exact = ("positions", "items", "same_top1", "dp_at")
    assert {k: merged["crosscheck"][k] for k in exact} == {k: full["crosscheck"][k] for k in exact}
    # other batches: the kernels' float32 rounding moves KL, never past the budget
    assert merged["crosscheck"]["budget"]["verdict"] == "PASS"
    # the merged lines summarised in another order: the same statistics, bit for bit
    lines = [json.loads(x) for x in (tmp_path / "m" / "results.jsonl").read_text().splitlines()]
    meta = json.loads((tmp_path / "m" / "run.json").read_text())
    assert summarise_lines(lines[::-1], meta)["distribution"] == merged


@pytest.mark.parametrize(
    "budget, says",
    [
        ("kl_mean=abc", "not a number"),
        ("kl_p99=0.1", "cannot judge kl_p99"),
        ("perplexity=2", "Unknown distribution metric"),
    ],
)
def test_a_malformed_budget_is_exit_2(budget, says, corpus, tmp_path, capsys):
    argv = ["sweep", GPT2, "--texts", str(corpus), "--checks", "crosscheck"]
    assert main([*argv, "--out", str(tmp_path / "o"), "--kl-budget", budget]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_budget_with_no_logits_to_judge_is_exit_2(corpus, tmp_path, capsys):
    argv = ["sweep", GPT2, "--texts", str(corpus), "--checks", "embeds"]
    assert main([*argv, "--out", str(tmp_path / "o"), "--kl-budget", "kl_mean=0.01"]) == 2
    assert "add crosscheck to --checks" in capsys.readouterr().err


def _positions(seed: int, items: int = 7) -> PositionMetrics:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 9, size=items)
    item = np.repeat(np.arange(items), lengths)
    n = item.size
    return PositionMetrics(
        kl=rng.exponential(0.01, n),
        same_top=rng.random(n) < 0.9,
        dp=rng.normal(0, 0.05, n),
        item=item,
        dp_at="target",
        nll_ref=rng.uniform(1, 3, n),
        nll_actual=rng.uniform(1, 3, n),
    )


def test_per_item_sums_give_the_positions_statistics_and_bootstrap():
    """Numpy only: the statistics and the bootstrap interval from the per-item sums equal
    those of :mod:`tfparity.compare` over every position."""
    m = _positions(1)
    tally = DistributionTally()
    for i, values in enumerate(item_values(m, 7)):
        tally.add(i, {"distribution": values})
    ours, exact = statistics(tally), summarise(m)
    for key in ("kl_mean", "kl_max", "same_top1", "rms_dp", "ln_ppl_ratio"):
        assert ours[key] == pytest.approx(getattr(exact, key), rel=1e-12)
    assert (ours["positions"], ours["items"]) == (exact.positions, exact.items)
    limits = parse_limits("kl_mean=0.02,kl_max=0.5,same_top1=0.5,rms_dp=0.1,ln_ppl_ratio=1")
    mine, theirs = budget_verdict(tally, limits), bootstrap_verdict(m, limits)
    for a, b in zip(mine["terms"], theirs.terms, strict=True):
        assert (a["low"], a["high"]) == pytest.approx((b.low, b.high), rel=1e-12)
        assert a["verdict"] == b.verdict
    assert mine["verdict"] == theirs.verdict


def test_a_straddling_interval_is_inconclusive_and_fails_nothing():
    m = _positions(2, items=12)
    tally = DistributionTally()
    for i, values in enumerate(item_values(m, 12)):
        tally.add(i, {"distribution": values})
    point = statistics(tally)["kl_mean"]
    verdict = budget_verdict(tally, parse_limits(f"kl_mean={point}"))
    assert verdict["verdict"] == "INCONCLUSIVE"
    summary = {"failed": 0, "complete": True, "distribution": {"crosscheck": {"budget": verdict}}}
    assert sweep_passed(summary)
    summary["distribution"]["crosscheck"]["budget"] = budget_verdict(
        tally, parse_limits(f"kl_mean={point / 100}")
    )
    assert not sweep_passed(summary)


def test_generate_items_carry_their_teacher_forced_statistics(corpus, tmp_path):
    out = tmp_path / "gen"
    opts = SweepOptions(generate=3, progress="none", kl_budget=tuple(parse_limits(BUDGET)))
    result = run_sweep(GPT2, corpus, out, opts)
    assert result.passed
    for r in records(out).values():
        d = r["checks"]["generate"]["distribution"]
        assert d["positions"] == 3 and d["same_top1"] == 3 and d["dp_at"] == "target"
    stats = result.summary["distribution"]["generate"]
    assert (stats["positions"], stats["items"]) == (18, 6)
    assert stats["budget"]["verdict"] == "PASS"


def test_too_few_items_give_no_interval_and_say_how_many():
    """Below MIN_ITEMS the sweep's bootstrap, like crosscheck's, gives no interval: every
    term INCONCLUSIVE (failing nothing), ``needed`` the items to give."""
    from tfparity.compare.bootstrap import MIN_ITEMS

    m = _positions(3, items=MIN_ITEMS - 1)
    tally = DistributionTally()
    for i, values in enumerate(item_values(m, MIN_ITEMS - 1)):
        tally.add(i, {"distribution": values})
    verdict = budget_verdict(tally, parse_limits("kl_mean=1e-9,same_top1=0.99"))
    assert verdict["verdict"] == "INCONCLUSIVE" and verdict["needed"] == MIN_ITEMS
    assert all(t["low"] is None is t["high"] for t in verdict["terms"])
    assert verdict["terms"][0]["value"] > 1e-9  # far over, and still no FAIL
    summary = {"failed": 0, "complete": True, "distribution": {"crosscheck": {"budget": verdict}}}
    assert sweep_passed(summary)
    more = _positions(3, items=MIN_ITEMS)
    tally = DistributionTally()
    for i, values in enumerate(item_values(more, MIN_ITEMS)):
        tally.add(i, {"distribution": values})
    enough = budget_verdict(tally, parse_limits("kl_mean=1e-9"))
    assert enough["needed"] is None and enough["verdict"] == "FAIL"
