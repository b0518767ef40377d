"""Shared fixtures: models are loaded once per test session (loading costs seconds)."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

# Under pytest-xdist each worker holds one core: TF, PyTorch and BLAS then use one thread
# each instead of every core, so two workers do not oversubscribe two cores. Read by the
# frameworks at import, which no test module does before this conftest.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in (
        "TF_NUM_INTRAOP_THREADS",
        "TF_NUM_INTEROP_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
    ):
        os.environ.setdefault(_name, "1")

# ----------------------------------------------------------------- the Eigen-kernels pass
# CI reruns the tests listed here under TF's Eigen kernels (TF_ENABLE_ONEDNN_OPTS=0,
# ``-m kernels``): those whose verdicts a kernel change can move, as measured by
# scripts/kernel_margins.py. The list is data, so the measurement can remake it.
KERNEL_TESTS = Path(__file__).with_name("kernel_tests.txt")


def kernel_tests() -> set[str]:
    lines = KERNEL_TESTS.read_text(encoding="utf-8").splitlines()
    return {line.split("#", 1)[0].strip() for line in lines} - {""}


def pytest_ignore_collect(collection_path, config):
    """Under ``-m kernels`` (the Eigen pass) only the files that hold listed tests are
    collected: importing the others would cost each worker seconds for nothing."""
    if config.option.markexpr != "kernels" or collection_path.suffix != ".py":
        return None
    files = {t.split("::", 1)[0] for t in kernel_tests()}
    try:
        relative = collection_path.relative_to(config.rootpath).as_posix()
    except ValueError:  # outside the repository: not ours to skip
        return None
    listed = relative.startswith("tests/") and collection_path.name.startswith("test_")
    return True if listed and relative not in files else None


# The files that take longest, longest first (seconds of one worker, measured with
# `pytest -n 2 --durations=0` on a loaded machine: the order matters, not the figures):
# with `--dist loadfile --no-loadscope-reorder`, xdist hands files out in this order to
# whichever worker is free, so the two end together (longest processing time first).
# The rest follow in collection order. Only the time it takes rests on this list: a
# file missing from it still runs.
HEAVY_FIRST = (
    "test_sweep_ray.py",  # 40-120 s: the Ray cluster, actors that import TF and torch
    "test_sweep_generate.py",  # 40 s, its Ray sweep on the same cluster
    "test_doc_examples.py",  # 90 s
    "test_crosscheck.py",  # 60 s
    "test_command_matrix.py",  # 60 s: every command on every kind of model
    "test_backends.py",  # 30 s: the session's warm backend processes start here
    "test_backends_hub.py",  # 40 s: keras-hub conversions, then the warm processes
    "test_backends_quantize.py",  # 20 s
    "test_backends_mixed.py",  # 15 s: four classifiers on the warm processes
    "test_backends_gradients.py",  # 15 s
    "test_saved_model.py",  # 50 s
    "test_exports.py",  # 30-80 s: a dynamo GPT-2 export and a tf2onnx conversion
    "test_generate.py",  # 10 s: ONNX generation; the GPT-2 export test_exports.py shares
    "test_litert.py",  # 45 s with test_litert_requantise.py and test_runtimes.py (SHARING)
    "test_remote_side.py",  # 35 s: one JAX worker (crosscheck and gradients)
    "test_checkpoints.py",  # 35 s: TF ports, SavedModels, a flatbuffer and a .keras built
    "test_calibrated_referee.py",  # 35 s
    "test_cli.py",  # 30 s: real processes
    "test_litert_quantised.py",  # 30 s
    "test_remote_generation.py",  # 30 s: one torch worker
    "test_quantize_attribute.py",  # 25 s
    "test_architectures.py",  # 25 s
    "test_sweep.py",  # 25 s
    "test_generation.py",  # 20 s
    "test_signatures.py",  # 20 s
    "test_keras_hub.py",  # 20 s
    "test_execution.py",  # 15 s
    "test_gradients.py",  # 15 s
    "test_pt_config.py",  # 15 s
)


# Files that share a session resource beyond one module run on one xdist worker, as one
# unit (`pytest -n 2`): each worker would otherwise start its own. The warm Keras backend
# processes (the plugin's ``tfparity_backend_workers``, about 25 s of imports per
# worker), the local Ray cluster (``ray_cluster``) and the flatbuffers of
# ``tiny_bert_litert``.
SHARING = {
    "test_backends.py": "keras backend processes",
    "test_backends_hub.py": "keras backend processes",
    "test_backends_quantize.py": "keras backend processes",
    "test_backends_mixed.py": "keras backend processes",
    "test_backends_gradients.py": "keras backend processes",
    "test_backends_shapes.py": "keras backend processes",
    "test_sweep_ray.py": "ray cluster",
    "test_sweep_generate.py": "ray cluster",
    "test_litert.py": "tiny bert flatbuffers",  # tiny_bert_litert
    "test_litert_requantise.py": "tiny bert flatbuffers",
    "test_runtimes.py": "tiny bert flatbuffers",
    "test_exports.py": "onnx gpt2 cache export",  # tests/adapters/onnx/conftest.py
    "test_generate.py": "onnx gpt2 cache export",
}


def pytest_xdist_make_scheduler(config, log):
    """xdist's per-file scheduling (``--dist loadfile``), with the files of
    :data:`SHARING` made one unit each."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharingScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:  # xdist's documented override point
            path = super()._split_scope(nodeid)
            return SHARING.get(Path(path).name, path)

    return SharingScheduling(config, log)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole
    listed = kernel_tests()
    collected = {item.nodeid for item in items}
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.kernels)
    if any("::" in str(arg) for arg in config.args):
        return  # single tests asked for: their files were not collected whole
    files = {nodeid.split("::", 1)[0] for nodeid in collected}
    root = config.rootpath
    stale = sorted(
        t
        for t in listed - collected
        if t.split("::", 1)[0] in files or not (root / t.split("::", 1)[0]).is_file()
    )
    if stale:
        raise pytest.UsageError(
            f"{KERNEL_TESTS.name} names tests that no longer exist: {stale}; remake it "
            "with scripts/kernel_margins.py, or rename the entries with their tests."
        )


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the session's Ray sweeps, started as RayEngine starts
    one: an engine joins a running cluster and leaves it up, so the cluster's start-up
    and shut-down (seconds each) are paid once, not per test (tests/sweep/ run on one
    xdist worker: :data:`SHARING`)."""
    ray = pytest.importorskip("ray")
    from tfparity.sweep.ray_engine import worker_env

    ray.init(
        num_cpus=max(os.cpu_count() or 1, 2),
        runtime_env={"env_vars": worker_env()},
        log_to_driver=False,
        include_dashboard=False,
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def backends_run(tfparity_backend_workers, tmp_path_factory):
    """``backends_run(model, **options)`` -> (exit code, text, JSON report) as
    ``tfparity backends`` gives them, through the API on the session's warm backend
    processes (the plugin's ``tfparity_backend_workers``): each backend's imports are
    paid once per test worker, not once per run."""
    import json

    import tfparity
    from tfparity.commands.backends import TOP_LEVEL
    from tfparity.report.backends import render_report
    from tfparity.report.jsonio import write_json

    def run(model: str, **options: Any) -> tuple[int, str, dict]:
        report = tfparity.backends(model, workers=tfparity_backend_workers, **options)
        path = tmp_path_factory.mktemp("backends-report") / "report.json"
        write_json([report], path, top_level=TOP_LEVEL)
        return (0 if report.passed else 1), render_report(report), json.loads(path.read_text())

    return run


@pytest.fixture(scope="session")
def backends_cli(tfparity_backend_workers, tmp_path_factory):
    """``backends_cli(*argv)`` -> (exit code, stdout, JSON report) of ``tfparity
    backends ARGV`` run by the CLI in this process, its backend processes taken from the
    session's warm ones (the one thing changed: ``run_request`` is given them)."""
    import contextlib
    import io
    import json

    from tfparity import cross_backend
    from tfparity.cli import main

    run_request = cross_backend.run_request

    def warm(request: Any, workers: Any = None) -> Any:
        return run_request(request, tfparity_backend_workers)

    def run(*argv: str) -> tuple[int, str, dict]:
        path = tmp_path_factory.mktemp("backends-cli") / "report.json"
        text = io.StringIO()  # capsys is function-scoped: capture by hand
        with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(text):
            patch.setattr(cross_backend, "run_request", warm)
            code = main(["backends", *argv, "--json", str(path)])
        return code, text.getvalue(), json.loads(path.read_text())

    return run


@functools.cache
def _load(spec: str):
    from tfparity.adapters.hf_tf.tf_model import TFModel

    return TFModel.load(spec)


@pytest.fixture(scope="session")
def load_tf_model():
    """``load_tf_model("tiny:bert")`` -> a cached TFModel. Do not mutate its weights;
    tests that break a model load their own copy with ``TFModel.load``."""
    return _load


@pytest.fixture(scope="session")
def minilm(load_tf_model):
    return load_tf_model("minilm")


# ----------------------------------------------------------------- exports (SavedModels)
# Written once per session into a temporary folder: each costs seconds to trace and save.


@functools.cache
def _export(root: str, kind: str):
    from pathlib import Path

    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import export_saved_model, perturb_ffn

    model = TFModel.load("tiny:bert")
    if kind.startswith("faulty"):
        perturb_ffn(model, layer=1)  # a layer-1 FFN weight scaled by 1.1
    hidden = not kind.endswith("no-hidden")
    embeds = kind == "clean"
    return export_saved_model(
        model,
        Path(root) / kind,
        hidden_states=hidden,
        inputs_embeds=embeds,
        mask=not kind.endswith("no-mask"),
        unmasked="ids_only" if kind == "two-signatures" else None,
    )


@pytest.fixture(scope="session")
def tiny_bert_export(tmp_path_factory):
    """``tiny_bert_export(kind)`` -> a SavedModel directory of tiny:bert with a serving
    signature: ``clean`` (hidden states, and an ``embeds`` signature over
    inputs_embeds), ``faulty`` (a layer-1 FFN weight scaled by 1.1, hidden states),
    ``faulty-no-hidden`` (the same fault, final outputs only), ``clean-no-mask`` and
    ``faulty-no-mask`` (a serving signature over input_ids without attention_mask) or
    ``two-signatures`` (serving_default, and ``ids_only`` without a mask). Read-only:
    LiteRT tests convert them too."""
    root = str(tmp_path_factory.mktemp("exports"))
    return lambda kind="clean": _export(root, kind)


# ----------------------------------------------------------------- flatbuffers (LiteRT)
# Converted once per session (seconds each): tests/adapters/exported/test_litert*.py and
# tests/checks/runtimes/ convert the same tiny:bert, on one xdist worker (SHARING).

LITERT_KINDS = {
    "fp32": {},
    "int8": {"quantisation": "dynamic-range int8"},
    "full": {"quantisation": "full int8"},
    "fault": {"hidden_states": True},
}


@functools.cache
def _litert(root: str, kind: str):
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import perturb_ffn, to_litert

    model = _load("tiny:bert")  # converting reads the weights, changes none
    if kind == "fault":
        model = TFModel.load("tiny:bert")
        perturb_ffn(model, layer=1, factor=1.1)
    return to_litert(model, Path(root) / f"{kind}.tflite", **LITERT_KINDS[kind])


@pytest.fixture(scope="session")
def tiny_bert_litert(tmp_path_factory):
    """``tiny_bert_litert(kind)`` -> a LiteRT flatbuffer of tiny:bert at the static
    [2, 16]: ``fp32``, ``int8`` (dynamic-range), ``full`` (full int8) or ``fault`` (float32,
    a layer-1 FFN weight scaled by 1.1, hidden states returned). Read-only."""
    root = str(tmp_path_factory.mktemp("litert"))
    return lambda kind: _litert(root, kind)


# Floats that the CPU's kernels may move between two sweeps of the same items (another
# batch size, thread count or instruction set): held to within this factor, not digits.
KERNEL_FACTOR = 10.0


def _stable_view(summary: dict) -> dict:
    """A sweep summary without its run facts, worst items by verdict only (their order
    among passes follows the float diffs)."""
    out = {k: v for k, v in summary.items() if k not in ("run", "worst_items")}
    out["worst_verdicts"] = [w["passed"] for w in summary["worst_items"]]
    return out


def _differences(a, b, path: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a)} vs {sorted(b)}"]
        return [d for k in a for d in _differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, float) and isinstance(b, float):
        small, large = sorted((abs(a), abs(b)))
        if a == b or (small > 0 and large <= small * KERNEL_FACTOR):
            return []
    elif a == b:
        return []
    return [f"{path}: {a!r} vs {b!r}"]


@pytest.fixture(scope="session")
def record_differences():
    """``record_differences(a, b)`` -> where two JSON values (e.g. two sweeps' records of
    one item) differ: every count, verdict and name exactly, floats within KERNEL_FACTOR."""
    return lambda a, b: _differences(a, b, "record")


@pytest.fixture(scope="session")
def sweep_differences():
    """``sweep_differences(a, b)`` -> where two sweep summaries of the same items differ:
    every count, verdict and name exactly, floats to within KERNEL_FACTOR."""
    return lambda a, b: _differences(_stable_view(a), _stable_view(b), "summary")


# ----------------------------------------------------------------- sweep engines for tests
# Test seams, kept out of the production options: engines that stop or break a sweep on
# cue, chosen like any engine, by the type of SweepOptions.engine (runner.ENGINES).


@dataclass(frozen=True)
class StopAfter:
    """Engine options: the engine of ``inner`` (None: local), stopped once ``items``
    items are written, without flushing the buckets (a simulated kill)."""

    items: int
    inner: Any = None


@dataclass
class StoppingEngine:
    engine: Any  # a SweepEngine
    items: int

    @property
    def top1_note(self) -> str | None:
        return self.engine.top1_note

    def records(self, items: Iterator) -> Iterator[list[dict]]:
        written = 0
        for records in self.engine.records(items):
            yield records
            written += len(records)
            if written >= self.items:
                return  # as a kill: the run stops here, what was written stays

    def run_facts(self) -> dict:
        return self.engine.run_facts()

    def close(self) -> None:
        self.engine.close()


@dataclass(frozen=True)
class KillActorAfter:
    """Engine options: the Ray engine of ``ray`` (a RayOptions, one batch per chunk),
    one of whose busy actors is ``ray.kill``-ed once ``chunks`` chunks have come back."""

    chunks: int
    ray: Any


@dataclass
class ActorKillingEngine:
    engine: Any  # a RayEngine
    chunks: int

    @property
    def top1_note(self) -> str | None:
        return self.engine.top1_note

    def records(self, items: Iterator) -> Iterator[list[dict]]:
        finished = 0
        for records in self.engine.records(items):
            yield records
            if any("skipped" in r for r in records):
                continue  # an item too long to run: no chunk
            finished += 1  # one batch per chunk
            if finished == self.chunks:
                busy = self.engine.busy_actors()  # an actor with unfinished chunks
                if busy:
                    self.engine.ray.kill(busy[0], no_restart=True)

    def run_facts(self) -> dict:
        return self.engine.run_facts()

    def close(self) -> None:
        self.engine.close()


@pytest.fixture
def stop_after(monkeypatch):
    """``SweepOptions(engine=stop_after(n))``: a sweep killed once n items are written."""
    from tfparity.sweep.runner import ENGINES

    def start(model, checks, pt, options, execution):
        inner = options.engine.inner
        engine = ENGINES[type(inner)](model, checks, pt, replace(options, engine=inner), execution)
        return StoppingEngine(engine, options.engine.items)

    monkeypatch.setitem(ENGINES, StopAfter, start)
    return StopAfter


@pytest.fixture
def kill_actor_after(monkeypatch):
    """``SweepOptions(engine=kill_actor_after(n, RayOptions(...)))``: a Ray sweep that
    loses one busy actor once n chunks have come back."""
    from tfparity.sweep.engine import SweepEngine
    from tfparity.sweep.ray_engine import RayEngine
    from tfparity.sweep.runner import ENGINES

    def start(model, checks, pt, options, execution):
        assert options.engine.ray.chunk_batches == 1  # chunks are counted as batches
        ray_options = replace(options, engine=options.engine.ray)
        engine = RayEngine.start(model, checks, pt, ray_options, execution)
        assert isinstance(engine, SweepEngine)
        return ActorKillingEngine(engine, options.engine.chunks)

    monkeypatch.setitem(ENGINES, KillActorAfter, start)
    return KillActorAfter
