"""tfparity merge: shards merged give exactly the unsharded summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfparity.cli import main
from tfparity.sweep import DEFAULT_CORPUS, Shard, SweepOptions, run_sweep

CHECKS = ("embeds", "crosscheck")


def without_run(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "run"}


@pytest.fixture(scope="module")
def runs(load_tf_model, tmp_path_factory):
    """An unsharded sweep (batch 8) and shards 0/2, 1/2 (batch 5: other batches)."""
    from tfparity.adapters.pt_model import load_pt

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


def test_merge_equals_unsharded_summary(runs, capsys):
    root, full, shards = runs
    out = root / "merged"
    assert main(["merge", str(shards[0].out), str(shards[1].out), "--out", str(out)]) == 0
    merged = json.loads((out / "summary.json").read_text())
    assert without_run(merged) == without_run(full.summary)
    assert merged["per_check"]["crosscheck"]["max_abs_diff"]["max"] > 0  # floats, exactly
    assert merged["run"]["all_shards"] is True
    assert "PASS sweep: 30/30" in capsys.readouterr().out


def test_merge_with_a_missing_shard_is_incomplete(runs, tmp_path):
    root, full, shards = runs
    assert main(["merge", str(shards[0].out), "--out", str(tmp_path / "m")]) == 1
    assert json.loads((tmp_path / "m" / "summary.json").read_text())["complete"] is False


def test_merge_refuses_mixed_or_repeated_shards(runs, tmp_path, capsys, load_tf_model):
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
        SweepOptions(("embeds",), shard=Shard(1, 2), progress="none", max_items=1),
    )
    assert main(["merge", str(shards[0].out), str(other), "--out", str(tmp_path / "b")]) == 2
    assert "not a shard of the same sweep" in capsys.readouterr().err
