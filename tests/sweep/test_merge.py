"""tfparity merge: shards merged give exactly the summary of all their lines, and the
unsharded run's counts and verdicts (its floats to within the kernels' reach)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfparity.cli import main
from tfparity.sweep import DEFAULT_CORPUS, Shard, SweepOptions, run_sweep
from tfparity.sweep.summary import summarise

CHECKS = ("embeds", "crosscheck")


@pytest.fixture(scope="module")
def runs(load_tf_model, tmp_path_factory):
    """An unsharded sweep (batch 8) and shards 0/2, 1/2 (batch 5: other batches)."""
    from tfparity.adapters.reference.pt_model import load_pt

    root = tmp_path_factory.mktemp("merge")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(DEFAULT_CORPUS.read_text().splitlines()[:30]) + "\n")
    tiny = load_tf_model("tiny:bert")
    pt = load_pt("tiny:bert")
    full = run_sweep(
        tiny, corpus, root / "full", SweepOptions(CHECKS, batch_size=8, progress="none"), pt=pt
    )
    shards = [
        run_sweep(
            tiny,
            corpus,
            root / f"shard{k}",
            SweepOptions(CHECKS, batch_size=5, shard=Shard(k, 2), progress="none"),
            pt=pt,
        )
        for k in (0, 1)
    ]
    return root, full, shards


def test_shards_are_disjoint_and_cover_the_corpus(runs):
    root, full, shards = runs
    indices = [
        {json.loads(x)["index"] for x in (s.out / "results.jsonl").read_text().splitlines()}
        for s in shards
    ]
    assert indices[0] == set(range(0, 30, 2)) and indices[1] == set(range(1, 30, 2))
    assert all(s.summary["complete"] for s in shards)


def test_merge_equals_unsharded_summary(runs, capsys, sweep_differences):
    root, full, shards = runs
    out = root / "merged"
    assert main(["merge", str(shards[0].out), str(shards[1].out), "--out", str(out)]) == 0
    merged = json.loads((out / "summary.json").read_text())
    lines = [
        json.loads(x) for s in shards for x in (s.out / "results.jsonl").read_text().splitlines()
    ]
    meta = json.loads((full.out / "run.json").read_text())
    exact = summarise(sorted(lines, key=lambda x: -x["index"]), meta)  # order-free
    assert {k: v for k, v in merged.items() if k != "run"} == exact  # floats, exactly
    assert sweep_differences(merged, full.summary) == []  # other batches: kernels' reach
    assert merged["run"]["all_shards"] is True
    assert "PASS sweep: 30/30" in capsys.readouterr().out


def test_the_kernel_tolerant_comparison_holds_counts_and_verdicts_exactly(runs, sweep_differences):
    import copy

    full = runs[1].summary
    moved = copy.deepcopy(full)
    moved["per_check"]["crosscheck"]["max_abs_diff"]["p50"] *= 3  # another kernel's digits
    moved["run"] = {}
    assert sweep_differences(moved, full) == []
    for path, value in ((("passed",), 29), (("per_check", "embeds", "failed"), 1)):
        broken = copy.deepcopy(full)
        target = broken
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        assert sweep_differences(broken, full), path
    far = copy.deepcopy(full)
    far["per_check"]["crosscheck"]["max_abs_diff"]["max"] *= 100
    assert sweep_differences(far, full)
    flipped = copy.deepcopy(full)
    flipped["worst_items"][0]["passed"] = False
    assert sweep_differences(flipped, full)


def test_merge_with_a_missing_shard_is_incomplete(runs, tmp_path):
    root, full, shards = runs
    assert main(["merge", str(shards[0].out), "--out", str(tmp_path / "m")]) == 1
    assert json.loads((tmp_path / "m" / "summary.json").read_text())["complete"] is False


def test_merge_refuses_mixed_or_repeated_shards(runs, tmp_path, capsys, load_tf_model, stop_after):
    root, full, shards = runs
    assert (
        main(["merge", str(shards[0].out), str(shards[0].out), "--out", str(tmp_path / "a")]) == 2
    )
    assert "distinct shards" in capsys.readouterr().err
    other = tmp_path / "other"
    corpus = Path(json.loads((full.out / "run.json").read_text())["corpus"]["path"])
    run_sweep(
        load_tf_model("tiny:bert"),
        corpus,
        other,
        SweepOptions(("embeds",), shard=Shard(1, 2), progress="none", engine=stop_after(1)),
    )
    assert main(["merge", str(shards[0].out), str(other), "--out", str(tmp_path / "b")]) == 2
    assert "not a shard of the same sweep" in capsys.readouterr().err
