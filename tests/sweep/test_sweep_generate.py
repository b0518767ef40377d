"""``tfparity sweep --generate N``: greedy generation, item by item, over a corpus.

Both ways, on the tiny GPT-2 causal LM: clean, every token of every item agrees (exit 0);
with layer 1's MLP up-projection scaled by 1.5, items part at a first divergent step that
each record names, with both margins, judged a defect (exit 1). The Ray engine gives the
local engine's records item by item; a stopped sweep resumes to the full run's summary;
what the sweep cannot honour is exit 2, naming why. A T5 seq2seq LM sweeps its
decoder's tokens, and a decoder fault fails its items.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.hf_tf.weight_names import tf_weights_by_pt_name
from tfparity.cli import main
from tfparity.report.sweep import render_summary
from tfparity.sweep import SweepOptions, run_sweep, summarise
from tfparity.sweep.generate import VERDICTS, verdict
from tfparity.testing import perturb_ffn, scale

GPT2 = "tiny:gpt2/causal-lm"
T5 = "tiny:t5/seq2seq-lm"
N = 8
PROMPTS = (
    "The quick brown fox",
    "Hello world.",
    "Numerical parity means that two implementations",
    "A sweep decodes every line of its corpus",
)


def records(out: Path) -> dict[int, dict]:
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {r["index"]: r for r in lines}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gen") / "prompts.txt"
    path.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def broken_port(tmp_path_factory) -> Path:
    """The tiny GPT-2 with layer 1's MLP up-projection scaled by 1.5, saved (the Ray
    engine loads models by spec in its workers)."""
    path = tmp_path_factory.mktemp("port") / "gpt2-ffn"
    port = TFModel.load(GPT2)
    perturb_ffn(port, 1, 1.5)
    port.model.save_pretrained(path)
    port.tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def clean(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "out"
    options = SweepOptions(generate=N, progress="none")
    return run_sweep(GPT2, corpus, out, options)


@pytest.fixture(scope="module")
def broken(corpus, broken_port, tmp_path_factory):
    out = tmp_path_factory.mktemp("broken") / "out"
    argv = ["sweep", str(broken_port), "--pt", GPT2, "--texts", str(corpus)]
    argv += ["--generate", str(N), "--out", str(out), "--progress", "none"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(argv)
    return code, out, printed.getvalue()


def test_a_clean_causal_lm_agrees_on_every_token_of_every_item(clean):
    assert clean.passed and clean.summary["checks"] == ["generate"]  # alone without --checks
    for r in records(clean.out).values():
        result = r["checks"]["generate"]
        g = result["generation"]
        assert result["passed"] and r["passed"], g["problems"]
        assert g["tokens_agreed"] == g["new_tokens"] == N and g["verdict"] == "agree"
        assert g["first_divergent_step"] is None and g["tf_tokens"] == g["pt_tokens"]
        assert g["cache_ok"] and not g["defects"] and not g["referee_failures"]
        assert g["prompt_tokens"] == r["tokens"]  # the item itself, unpadded
        assert result["top1"] == {"agree": N, "tokens": N}  # teacher-forced choices
    g = clean.summary["generation"]
    assert (g["tokens_agreed"], g["tokens"], g["token_agreement"]) == (4 * N, 4 * N, 1.0)
    assert g["items_all_agreed"] == 4 and g["items_diverged"] == 0
    assert g["first_divergent_step"]["min"] is None
    assert g["verdicts"] == {"agree": 4, "near-tie": 0, "cache": 0, "defect": 0}
    assert clean.summary["per_check"]["generate"]["passed"] == 4


def test_merged_generate_shards_give_the_generation_figures_again(clean, tmp_path):
    """The figures come from the result lines alone, so a merge recomputes them."""
    assert main(["merge", str(clean.out), "--out", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert merged["generation"] == clean.summary["generation"]


def _line(index: int, first: dict | None, **generation) -> dict:
    g = {"new_tokens": 8, "tokens_agreed": 8 if first is None else first["step"]}
    g |= {"first_divergent_step": first, "defects": [], "near_ties": [], "cache_ok": True}
    g |= {"referee_failures": [], **generation}
    g["verdict"] = verdict(g)
    passed = g["verdict"] in ("agree", "near-tie")
    checks = {"generate": {"passed": passed, "max_abs_diff": 0.1, "generation": g}}
    return {"index": index, "id": str(index), "text": "t", "passed": passed, "checks": checks}


def _first(step: int, *, near_tie: bool = False, recomputed_agrees: bool = False) -> dict:
    return {"step": step, "near_tie": near_tie, "recomputed_agrees": recomputed_agrees}


def test_near_ties_are_counted_apart_from_defects_and_from_the_cache():
    """Numpy only: the summary of four items, one of each verdict (a near-tie is rare on
    real models, so it is made here)."""
    lines = [
        _line(0, None),
        _line(1, _first(5, near_tie=True), near_ties=[5]),
        _line(2, _first(2, recomputed_agrees=True), cache_ok=False, cache_failures=[2]),
        _line(3, _first(0), defects=[0, 3], referee_failures=[0, 3]),
    ]
    assert [x["checks"]["generate"]["generation"]["verdict"] for x in lines] == list(VERDICTS)
    meta = {"model": "m", "checks": ["generate"], "corpus": {"items": 4, "path": "c.txt"}}
    g = summarise(lines, meta)["generation"]
    assert g["verdicts"] == {"agree": 1, "near-tie": 1, "cache": 1, "defect": 1}
    assert (g["tokens_agreed"], g["tokens"], g["items_all_agreed"]) == (8 + 5 + 2 + 0, 32, 1)
    assert g["items_diverged"] == 3 and g["items_cache_inconsistent"] == 1
    assert g["first_divergent_step"] == {
        "min": 0,
        "median": 2.0,
        "max": 5,
        "histogram": {"0": 1, "2": 1, "5": 1},
    }
    assert g["items_logits_off"] == 1
    text = render_summary({**summarise(lines, meta), "run": {}}, "out")
    assert "why: near-tie 1 (rounding, not a defect), defect 1, cache 1" in text


def test_a_broken_port_fails_with_each_items_first_divergent_step(broken):
    code, out, text = broken
    assert code == 1
    got = records(out)
    parted = {i: r["checks"]["generate"] for i, r in got.items()}
    parted = {i: c for i, c in parted.items() if c["generation"]["first_divergent_step"]}
    assert parted, "the fault changes no greedy token: the test proves nothing"
    for result in parted.values():
        g = result["generation"]
        first = g["first_divergent_step"]
        k = first["step"]
        assert g["tokens_agreed"] == k and g["tf_tokens"][:k] == g["pt_tokens"][:k]
        assert first["tf_token"] == g["tf_tokens"][k] != g["pt_tokens"][k] == first["pt_token"]
        assert first["tf_margin"] > 0 and first["pt_margin"] > 0 and not first["near_tie"]
        assert g["verdict"] == "defect" and k in g["defects"]
        assert not result["passed"] and "tokens" in result["failing"]
        assert f"first divergent step {k}" in g["problems"][0]
        # the forward pass is broken, not the cache: cached steps match recomputation
        assert g["cache_ok"]
    summary = json.loads((out / "summary.json").read_text())
    g = summary["generation"]
    steps = sorted(c["generation"]["first_divergent_step"]["step"] for c in parted.values())
    assert g["items_diverged"] == len(parted) == g["verdicts"]["defect"]
    assert (g["first_divergent_step"]["min"], g["first_divergent_step"]["max"]) == (
        steps[0],
        steps[-1],
    )
    assert g["tokens_agreed"] == sum(
        r["checks"]["generate"]["generation"]["tokens_agreed"] for r in got.values()
    )
    assert g["tokens_agreed"] < g["tokens"] == 4 * N
    assert summary["per_check"]["generate"]["failed"] >= len(parted)
    assert f"items whose tokens part: {len(parted)}" in text
    assert "tokens part at step" in text and "FAIL sweep" in text


def test_the_ray_engine_gives_the_local_records_item_by_item(
    broken, broken_port, tmp_path, record_differences, ray_cluster
):
    """Two of the four items (each is decoded alone, so its record does not depend on the
    rest of the corpus), on one Ray worker of the session's cluster: the records of the
    local run."""
    from tfparity.sweep.ray_engine import RayOptions

    corpus = tmp_path / "two.txt"
    corpus.write_text("\n".join(PROMPTS[1:3]) + "\n", encoding="utf-8")
    options = SweepOptions(generate=N, progress="none", engine=RayOptions(workers=1))
    ray_run = run_sweep(str(broken_port), corpus, tmp_path / "ray", options, pt=GPT2)
    assert ray_run.summary["run"]["engine"]["name"] == "ray" and not ray_run.passed
    local = {r["text"]: r["checks"]["generate"] for r in records(broken[1]).values()}
    remote = {r["text"]: r["checks"]["generate"] for r in records(ray_run.out).values()}
    assert set(remote) == set(PROMPTS[1:3])
    for text, b in remote.items():
        a = local[text]
        assert record_differences(a, b) == []  # every figure; floats within a factor
        assert b["generation"]["first_divergent_step"] is not None  # both items part


def test_a_killed_generate_sweep_resumes_to_the_full_summary(
    clean, corpus, tmp_path, sweep_differences, capsys
):
    """The clean run's output cut after two items and a torn line, as a kill leaves it."""
    out = tmp_path / "out"
    shutil.copytree(clean.out, out)
    kept = (out / "results.jsonl").read_text().splitlines()[:2]
    (out / "results.jsonl").write_text("\n".join(kept) + '\n{"index": 3, "id', encoding="utf-8")
    options = SweepOptions(generate=N, progress="none", resume=True)
    resumed = run_sweep(GPT2, corpus, out, options)
    assert resumed.summary["run"]["items_this_run"] == 2 and len(records(out)) == 4
    assert sweep_differences(resumed.summary, clean.summary) == []
    # another N is another sweep: its results are not mixed into these
    argv = ["sweep", GPT2, "--texts", str(corpus), "--out", str(out), "--resume"]
    assert main([*argv, "--generate", str(N + 1)]) == 2
    assert "holds results of another sweep" in capsys.readouterr().err


def test_an_item_too_long_with_its_new_tokens_is_skipped_naming_why(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(PROMPTS[2] + "\n", encoding="utf-8")  # 20 tokens; 20 + 50 > 64
    result = run_sweep(GPT2, corpus, tmp_path / "o", SweepOptions(generate=50, progress="none"))
    (line,) = records(result.out).values()
    assert line["passed"] is None and result.summary["skipped"] == 1
    assert "with 50 new tokens more than the model's 64 positions" in line["skipped"]
    assert "--truncate to cut it to 14" in line["skipped"]


def test_a_keras_hub_causal_lm_sweeps_through_its_own_generate(corpus, tmp_path):
    out = tmp_path / "kh"
    result = run_sweep(
        "keras-hub:tiny:qwen2/causal-lm", corpus, out, SweepOptions(generate=4, progress="none")
    )
    assert result.passed, result.summary
    g = result.summary["generation"]
    assert g["tokens_agreed"] == g["tokens"] == 4 * len(PROMPTS)
    assert all(r["checks"]["generate"]["generation"]["cache_ok"] for r in records(out).values())


def test_a_t5_sweeps_its_decoder_and_a_decoder_fault_fails_its_items(corpus, tmp_path):
    """A seq2seq LM, loaded for --generate alone: each item feeds the encoder and the
    decoder's tokens are judged; a decoder FFN scaled by 3 parts tokens as a defect."""
    options = SweepOptions(generate=4, progress="none")
    clean = run_sweep(T5, corpus, tmp_path / "clean", options)
    assert clean.passed, clean.summary
    assert clean.summary["run"]["decoding"].startswith("seq2seq: the prompt feeds the encoder")
    g = clean.summary["generation"]
    assert g["tokens_agreed"] == g["tokens"] == 4 * len(PROMPTS)
    port = TFModel.load(T5, decoders=True)
    name = "decoder.block.0.layer.2.DenseReluDense.wi.weight"
    scale(tf_weights_by_pt_name(port.model)[name].variable, 3.0)
    broken = run_sweep(port, corpus, tmp_path / "broken", options, pt=T5)
    g = broken.summary["generation"]
    assert not broken.passed and g["verdicts"]["defect"] >= 1, g
    parted = [r for r in records(tmp_path / "broken").values() if not r["passed"]]
    step = parted[0]["checks"]["generate"]["generation"]["first_divergent_step"]
    assert step is not None and not step["near_tie"]


@pytest.mark.parametrize(
    "argv, words",
    [
        ([GPT2, "--generate", "0"], "an int >= 1 (got 0)"),
        ([GPT2, "--generate", "-3"], "an int >= 1 (got -3)"),
        ([GPT2, "--generate", "64"], "no prompt fits with 64 new tokens"),
        (["tiny:bert", "--generate", "4"], "not a causal language model"),
        (["tiny:gpt2", "--generate", "4"], "has no LM head"),
        (["keras-hub:tiny:gpt2", "--generate", "4"], "has no LM head"),  # the backbone
        ([GPT2, "--generate", "4", "--precision", "bf16"], "--precision bf16"),
        ([GPT2, "--generate", "4", "--xla"], "--xla cannot apply"),
        ([GPT2, "--generate", "4", "--atol", "1e-3"], "judged by the float64 referee"),
        ([GPT2, "--checks", "generate"], "runs with --generate N"),
        (["tiny:t5", "--generate", "4"], "(tiny:t5/seq2seq-lm)"),  # the encoder alone
        ([T5, "--generate", "4", "--checks", "embeds"], "run on a seq2seq model's encoder"),
    ],
)
def test_what_the_sweep_cannot_honour_exits_2_naming_why(argv, words, corpus, tmp_path, capsys):
    out = ["--texts", str(corpus), "--out", str(tmp_path / "o"), "--progress", "none"]
    assert main(["sweep", *argv, *out]) == 2
    assert words in capsys.readouterr().err
