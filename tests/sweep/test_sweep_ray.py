"""tfparity sweep --engine ray: a local Ray cluster with 2 workers gives the serial
run's summary, and a worker killed mid-run loses and duplicates nothing."""

from __future__ import annotations

import json
import sys

import pytest

from tfparity.cli import main
from tfparity.sweep import DEFAULT_CORPUS, SweepOptions, run_sweep

N_ITEMS = 24  # six chunks of four: three back, then one busy actor is killed


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    texts = DEFAULT_CORPUS.read_text(encoding="utf-8").splitlines()[:N_ITEMS]
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def test_ray_sweep_with_a_killed_worker_equals_the_serial_run(
    ray_cluster, corpus, tmp_path, sweep_differences, kill_actor_after
):
    from tfparity.sweep.ray_engine import RayOptions

    # embeds alone: the actors' start-up is the cost, and the test below runs the
    # cross-check (PyTorch in the actor) through Ray
    base = dict(checks=("embeds",), batch_size=4, progress="none")
    serial = run_sweep("tiny:bert", corpus, tmp_path / "serial", SweepOptions(**base))
    # 2 local workers (1 CPU each); one is ray.kill-ed while it holds unfinished chunks.
    engine = kill_actor_after(3, RayOptions(workers=2))
    ray_run = run_sweep("tiny:bert", corpus, tmp_path / "ray", SweepOptions(**base, engine=engine))
    assert sweep_differences(ray_run.summary, serial.summary) == []  # 1 thread vs all
    assert ray_run.summary["complete"] and ray_run.passed
    indices = [json.loads(x)["index"] for x in (tmp_path / "ray" / "results.jsonl").open()]
    assert sorted(indices) == list(range(N_ITEMS))  # every item exactly once
    facts = ray_run.summary["run"]["engine"]
    assert facts["name"] == "ray" and facts["workers"] == 2
    assert facts["workers_lost"] == 1 and facts["chunks_rerun"] >= 1
    # the finished output resumes and merges like a serial one
    assert main(["merge", str(tmp_path / "ray"), "--out", str(tmp_path / "merged")]) == 0


def test_engine_ray_without_ray_exits_2_naming_the_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    code = main(["sweep", "tiny:bert", "--engine", "ray", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "tfparity[ray]" in err and "extra" in err
    code = main(["sweep", "tiny:bert", "--address", "auto", "--out", str(tmp_path / "o")])
    assert code == 2 and "--engine ray" in capsys.readouterr().err


def test_ray_sweep_of_a_keras_hub_port_with_pt_equals_the_serial_run(
    ray_cluster, corpus, tmp_path, sweep_differences
):
    """A Keras 3 port runs eagerly in a Ray actor, against the --pt reference named by
    spec, and fails as the serial run does: keras-hub's BertBackbone hard-codes the tanh
    GELU, while BERT checkpoints use the exact one (docs/keras-hub.md)."""
    pytest.importorskip("keras_hub")
    from tfparity.sweep.ray_engine import RayOptions

    base = dict(checks=("embeds", "crosscheck"), batch_size=4, progress="none")
    # one chunk: the actor's start-up (TensorFlow, keras-hub, torch) is the cost, not items
    spec, pt, texts = "keras-hub:tiny:bert", "tiny:bert", corpus.read_text().splitlines()[:4]
    (tmp_path / "c4.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    serial = run_sweep(spec, tmp_path / "c4.txt", tmp_path / "s", SweepOptions(**base), pt=pt)
    engine = RayOptions(workers=1)  # one actor; two share a corpus in the test above
    ray_run = run_sweep(
        spec, tmp_path / "c4.txt", tmp_path / "r", SweepOptions(**base, engine=engine), pt=pt
    )
    assert sweep_differences(ray_run.summary, serial.summary) == []  # 1 thread vs all
    per_check = ray_run.summary["per_check"]
    assert per_check["embeds"]["passed"] == 4 and per_check["crosscheck"]["failed"] == 4
    assert not ray_run.passed and ray_run.summary["run"]["engine"]["name"] == "ray"
    assert json.loads((tmp_path / "r" / "run.json").read_text())["reference"] == pt
