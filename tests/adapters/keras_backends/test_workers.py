"""Serving worker processes (tfparity/adapters/keras_backends/workers.py): what the
parent says when one ends early, says nothing past its deadline, or cannot import
what the model needs. Each worker here stops before Keras is imported (its first
import is the module under test), so no backend starts: a second or less each.
Reuse across runs is tested on real runs in tests/checks/test_backends.py."""

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
