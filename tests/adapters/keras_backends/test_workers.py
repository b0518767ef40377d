"""Serving worker processes (tfparity/adapters/keras_backends/workers.py): what the
parent says when one ends early, says nothing past its deadline, or cannot import
what the model needs. Each worker here stops before Keras is imported (its first
import is the module under test), so no backend starts: a second or less each.
Reuse across runs is tested on real runs in tests/cross_backend/test_backends.py."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.keras_backends import LaunchPlan, launch, run_backends
from tfparity.adapters.keras_backends.workers import BackendWorkers, WorkerKey
from tfparity.errors import TfparityError


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Modules the workers import first: one that ends its process, one that hangs."""
    (tmp_path / "ends_at_import.py").write_text(
        "import os, sys\nsys.stderr.write('out of memory, say\\n')\nos._exit(3)\n"
    )
    (tmp_path / "hangs_at_import.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return tmp_path


def _plan(tmp_path, module: str) -> LaunchPlan:
    return LaunchPlan(tmp_path / "model.keras", ("tensorflow",), "tensorflow", (module,))


def test_a_process_that_ends_early_is_named_with_its_last_words(modules):
    with pytest.raises(TfparityError) as ended:
        run_backends(_plan(modules, "ends_at_import"), [np.zeros((1, 4), np.int32)])
    message = str(ended.value)
    assert "the tensorflow backend's process ended (exit code 3)" in message
    assert "out of memory, say" in message


def test_a_process_silent_past_its_deadline_is_killed_and_named(modules, monkeypatch):
    monkeypatch.setattr(launch, "WORKER_TIMEOUT_S", 1)
    with BackendWorkers() as workers:
        with pytest.raises(TfparityError, match="tensorflow backend's process ran past 1 s"):
            run_backends(_plan(modules, "hangs_at_import"), [np.zeros((1, 4))], 1, workers)
        assert workers.started() == 1


def test_a_module_that_cannot_be_imported_fails_the_run_naming_it(modules):
    with pytest.raises(TfparityError) as refused:
        run_backends(_plan(modules, "no_such_module_here"), [np.zeros((1, 4), np.int32)])
    assert "the tensorflow backend could not run the model" in str(refused.value)
    assert "No module named 'no_such_module_here'" in str(refused.value)


def test_processes_are_kept_apart_by_backend_x64_and_imports():
    plain = WorkerKey.of("jax", ("float32",), ("a",))
    assert WorkerKey.of("jax", ("float32", "float64"), ("a",)) != plain  # x64 at start-up
    assert WorkerKey.of("jax", ("float32",), ("b",)) != plain
    # TensorFlow computes float64 as asked in any process: one key for both precisions
    assert WorkerKey.of("tensorflow", ("float32", "float64"), ()) == WorkerKey.of(
        "tensorflow", ("float32",), ()
    )


def test_a_served_run_starts_from_keras_defaults_after_a_float64_one(tmp_path):
    """The serving loop run here (Keras on TensorFlow): a float64 referee run sets the
    global dtype policy; the next run on the same worker still computes in float32.
    A line of an unknown kind is skipped, each request answered once."""
    import io
    import json

    import keras

    from tfparity.adapters.keras_backends import worker
    from tfparity.adapters.keras_backends.protocol import MARK
    from tfparity.examples.keras_backends_model import save

    model = save(tmp_path / "clean.keras")
    given = tmp_path / "inputs.npz"
    np.savez(given, input_0=np.zeros((1, 4), np.int32))

    def request(out, *precision):
        fields = {"model": str(model), "inputs": str(given), "out": str(tmp_path / out)}
        return "run " + json.dumps({**fields, "precision": list(precision), "gradients": None})

    lines = [request("a.npz", "float32", "float64"), "noise", request("b.npz", "float32")]
    reply = io.StringIO()
    try:
        worker.serve(["tfparity.examples.keras_backends_model"], lines, reply)
    finally:
        keras.config.set_dtype_policy("float32")
    assert reply.getvalue().splitlines() == [f"{MARK}done ", f"{MARK}done "]
    first = json.loads((tmp_path / "a.npz.json").read_text())["runs"]
    second = json.loads((tmp_path / "b.npz.json").read_text())["runs"]
    assert first["float64"]["dtypes"] == ["float64"]
    assert list(second) == ["float32"] and second["float32"]["dtypes"] == ["float32"]
    assert keras.config.dtype_policy().name == "float32"


# One worker stack for both uses: the pooled processes of `tfparity backends` and the
# keras-hub side's own worker for `--backend jax|torch` (keras_hub/remote.py's InWorker).
# The worker serves three trivial kinds of request beside its own table; its Keras is a
# stand-in module, so no backend starts (each process well under a second of CPU).
TRIVIAL_SERVING = """
import sys, time, types
sys.modules["keras"] = types.ModuleType("keras")  # a stand-in: these kinds use no Keras
from tfparity.adapters.keras_backends import worker
from tfparity.adapters.keras_backends.protocol import Handler

def fails(session, text):
    raise ValueError("no such thing as " + text)

def hangs(session, text):
    time.sleep(60)
    return ""

kinds = {"fails": fails, "hangs": hangs, "echo": lambda session, text: text}
worker.serve([], sys.stdin, sys.stdout, {k: Handler(f, fresh=False) for k, f in kinds.items()})
"""


@pytest.fixture
def both_uses(tmp_path, monkeypatch):
    """For each use, a function starting one more of its workers, serving the trivial
    kinds: a pooled one (and how the pool closes it), a keras-hub side's (and its
    ``close``)."""
    import tempfile

    from tfparity.adapters.keras_backends.workers import ServingWorker
    from tfparity.adapters.keras_hub.remote import InWorker

    (tmp_path / "trivial_serving.py").write_text(TRIVIAL_SERVING)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    key = WorkerKey.of("jax", ("float32",), (), entry="trivial_serving")
    started = []

    def pooled():
        pool = BackendWorkers()
        started.append(pool)
        worker = pool.take(key)
        return worker, worker, pool.close, []  # a pooled worker holds no files

    def keras_hub():
        remote = InWorker("jax", ServingWorker(key), tempfile.TemporaryDirectory(), "m")
        started.append(remote)
        return remote, remote.worker, remote.close, [remote.root]

    yield {"pooled": pooled, "keras-hub": keras_hub}
    for held in started:
        held.close()


def test_an_error_a_timeout_and_a_close_are_the_same_for_both_uses(both_uses, monkeypatch):
    """A request that fails is one paragraph naming the backend, and the worker serves
    the next; one past its deadline is killed and named; a close ends the process (and
    the keras-hub side's files)."""
    from tfparity.adapters.keras_backends import workers

    said = {}
    for use, start in both_uses.items():
        asked, worker, close, files = start()
        with pytest.raises(TfparityError) as failed:
            asked.ask("fails", "x")
        assert asked.ask("echo", {"still": "serving"}) == '{"still": "serving"}', use
        close()
        assert worker.poll() is not None, use  # ended
        assert not any(path.exists() for path in files), use  # the side's files too

        asked, worker, _, _ = start()
        assert asked.ask("echo", "started") == '"started"'
        monkeypatch.setattr(workers, "REQUEST_TIMEOUT_S", 1)
        with pytest.raises(TfparityError) as late:
            asked.ask("hangs", {})
        monkeypatch.setattr(workers, "REQUEST_TIMEOUT_S", 600)
        assert worker.poll() is not None, use  # killed
        said[use] = (str(failed.value), str(late.value))
    assert said["pooled"] == said["keras-hub"]
    assert said["pooled"] == (
        'the jax backend could not run the model: ValueError: no such thing as "x"',
        "the jax backend's process ran past 1 s.",
    )
