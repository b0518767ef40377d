#!/usr/bin/env python3
"""Model loads per test file: a pytest plugin that counts and times them.

    PYTHONPATH=scripts pytest -p load_stats -n 2 --dist loadfile

prints, after the run, each test file's model loads (TF models, PyTorch references,
keras-hub sides, exports written and read, LiteRT conversions) and the seconds they
took, with the whole session's totals: how issue 29's "no test repeats another's model
load" is measured. Only the outermost load of a nested call counts (``load_pt`` calling
``PTModel.from_dir`` is one load). Workers write their counts under
``$LOAD_STATS_DIR`` (default ``.pytest_cache/load-stats``); the main process adds them.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (module, class or None, function, what it loads)
LOADERS = (
    ("tfparity.adapters.hf_tf.tf_model", "TFModel", "load", "tf"),
    ("tfparity.adapters.hf_tf.tf_model", "TFModel", "rebuilt", "tf (rebuilt)"),
    ("tfparity.adapters.reference.pt_model", None, "load_pt", "pytorch"),
    ("tfparity.adapters.reference.pt_model", "PTModel", "from_dir", "pytorch"),
    ("tfparity.adapters.reference.pt_model", "PTModel", "from_tf", "pytorch"),
    ("tfparity.adapters.keras_hub.task", None, "load_keras_hub_side", "keras-hub"),
    ("tfparity.adapters.exported", None, "load_export", "export read"),
    ("tfparity.adapters.exported.writer", None, "export_saved_model", "export written"),
    ("tfparity.adapters.exported.litert_convert", None, "to_litert", "litert converted"),
)

_state: dict[str, Any] = {"depth": 0, "file": None, "stats": {}}


def _counted(fn: Callable, kind: str) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        outermost = _state["depth"] == 0 and _state["file"] is not None
        _state["depth"] += 1
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _state["depth"] -= 1
            if outermost:
                per_file = _state["stats"].setdefault(_state["file"], {})
                count, seconds = per_file.get(kind, (0, 0.0))
                per_file[kind] = (count + 1, seconds + time.perf_counter() - start)

    return wrapper


def _out_dir(config: Any) -> Path:
    return Path(os.environ.get("LOAD_STATS_DIR") or config.rootpath / ".pytest_cache/load-stats")


def _count_loads() -> None:
    """Wrap the loaders in the process that runs tests, before test modules import them
    (a module that imported a function before would keep the unwrapped one)."""
    for module, owner_name, name, kind in LOADERS:
        owner = importlib.import_module(module)
        if owner_name:
            owner = getattr(owner, owner_name)
        raw = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        if isinstance(raw, classmethod):
            setattr(owner, name, classmethod(_counted(raw.__func__, kind)))
        else:
            setattr(owner, name, _counted(raw, kind))


def pytest_configure(config: Any) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker or not getattr(config.option, "numprocesses", None):
        _count_loads()  # this process runs the tests (an xdist worker, or no xdist)
    if not worker:
        out = _out_dir(config)
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.json"):
            old.unlink()


def pytest_runtest_setup(item: Any) -> None:
    _state["file"] = item.nodeid.split("::", 1)[0]


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    _state["file"] = None


def pytest_sessionfinish(session: Any) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    out = _out_dir(session.config)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{worker}.json").write_text(json.dumps(_state["stats"]))


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    merged: dict[str, dict[str, list[float]]] = {}
    for path in sorted(_out_dir(config).glob("*.json")):
        for test_file, kinds in json.loads(path.read_text()).items():
            for kind, (count, seconds) in kinds.items():
                slot = merged.setdefault(test_file, {}).setdefault(kind, [0, 0.0])
                slot[0] += count
                slot[1] += seconds
    write = terminalreporter.write_line
    write("")
    write("model loads per test file (count, seconds)")
    totals: dict[str, list[float]] = {}
    by_time = sorted(merged.items(), key=lambda kv: -sum(s for _, s in kv[1].values()))
    for test_file, kinds in by_time:
        parts = ", ".join(f"{k} {int(c)} ({s:.1f} s)" for k, (c, s) in sorted(kinds.items()))
        write(f"  {test_file}: {parts}")
        for kind, (count, seconds) in kinds.items():
            slot = totals.setdefault(kind, [0, 0.0])
            slot[0] += count
            slot[1] += seconds
    whole = ", ".join(f"{k} {int(c)} ({s:.1f} s)" for k, (c, s) in sorted(totals.items()))
    write(f"  session: {whole}")
